"""``kind = "models"``: cost models trained on the same records, scored on held-out networks.

Per profile, seed and model: a fresh model trained on every program of the training
networks and scored on the held-out ones. Rows: mean and std over seeds, and training time;
``[experiment] jobs`` runs that many profiles at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

from tcl.errors import TclError
from tcl.experiments._common import (RECORDS, check_data, check_model, fit_score, map_jobs, model_options, split,
                                     summarize)

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


def _one_profile(cfg: Mapping[str, Any], profile: str, progress: Callable[[str], None]) -> list[dict[str, Any]]:
    """The rows of one profile: every model over every seed."""
    from tcl.discovery import registry as current_registry
    from tcl.training import torch_threads

    registry, exp = current_registry(), cfg["experiment"]
    rows = []
    with torch_threads(exp["threads"]):
        train, held = split(cfg, profile)
        for name in cfg["models"]["names"]:
            options = model_options(cfg, cfg["models"]["options"].get(name, {}))
            runs = []
            for seed in exp["seeds"]:
                progress(f"{profile}: {name}, seed {seed}")
                runs.append(fit_score(registry, name, options, train, held, seed))
            rows.append({"profile": profile, "model": name, "programs": len(train), "held_tasks": len(held.tasks),
                         **summarize(runs)})
            progress(f"{profile}: {name} top1 {rows[-1]['top1']:.4f} +- {rows[-1]['top1_std']:.4f}")
    return rows


def run(cfg: dict[str, Any], out_dir: Path, *, registry: Any, progress: Callable[[str], None]) -> dict[str, Any]:
    exp = cfg["experiment"]
    per_profile = map_jobs(_one_profile, [(cfg, profile) for profile in exp["profiles"]], exp["profiles"],
                           exp["jobs"], progress)
    return {"rows": [row for rows in per_profile for row in rows], "metric": "top1", "label": ["profile", "model"],
            "title": f"Top-1 on held-out {', '.join(exp['held_out'])}", "held_out": exp["held_out"]}
