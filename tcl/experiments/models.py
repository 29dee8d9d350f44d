"""``kind = "models"``: cost models trained on the same records, scored on held-out networks.

Per profile, seed and model: a fresh model trained on every program of the training
networks and scored on the held-out ones. Rows: mean and std over seeds, and training time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from tcl.errors import TclError
from tcl.experiments._common import RECORDS, check_data, check_model, fit_score, model_options, split, summarize

SCHEMA = {
    "experiment": RECORDS,
    # options: one table per model name, e.g. [models.options.mamba] epochs = 10
    "models": {"names": ("list[str]", ["mamba", "tlp", "mlp", "xgb"]), "options": ("table", {})},
}


def validate(cfg: dict[str, Any], registry: Any) -> None:
    check_data(cfg)
    names, options = cfg["models"]["names"], cfg["models"]["options"]
    if not names:
        raise TclError("[models] names must not be empty")
    for name in names:
        check_model(registry, cfg, name, options.get(name, {}))
    extra = sorted(set(options) - set(names))
    if extra:
        raise TclError(f"[models.options] has tables for {', '.join(extra)}, which [models] names does not list")


def run(cfg: dict[str, Any], out_dir: Path, *, registry: Any, progress: Callable[[str], None]) -> dict[str, Any]:
    from tcl.training import torch_threads

    exp, names = cfg["experiment"], cfg["models"]["names"]
    rows = []
    with torch_threads(exp["threads"]):
        for profile in exp["profiles"]:
            train, held = split(cfg, profile)
            for name in names:
                options = model_options(cfg, cfg["models"]["options"].get(name, {}))
                runs = []
                for seed in exp["seeds"]:
                    progress(f"{profile}: {name}, seed {seed}")
                    runs.append(fit_score(registry, name, options, train, held, seed))
                rows.append({"profile": profile, "model": name, "programs": len(train), "held_tasks": len(held.tasks),
                             **summarize(runs)})
                progress(f"{profile}: {name} top1 {rows[-1]['top1']:.4f} +- {rows[-1]['top1_std']:.4f}")
    return {"rows": rows, "metric": "top1", "label": ["profile", "model"],
            "title": f"Top-1 on held-out {', '.join(exp['held_out'])}", "held_out": exp["held_out"]}
