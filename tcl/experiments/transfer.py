"""``kind = "transfer"``: transfer strategies compared over one sequence of platforms.

For each strategy and seed, :func:`tcl.transfer.run_sequence` trains the base model on the
first profile and carries it to each next one with a ``budget`` sample. Rows: per strategy
and platform, Top-1/Top-5 on that platform's held-out tasks and, averaged over the earlier
platforms, on theirs (forgetting); mean and std over seeds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from tcl.errors import TclError
from tcl.experiments import plugin
from tcl.experiments._common import RECORDS, check_data, eval_dir, summarize

SCHEMA = {
    "experiment": RECORDS,
    "transfer": {
        "strategies": ("list[str]", ["continual-kd", "fine-tune", "scratch"]),
        "budget": ("number", 0.1),
        "sampler": ("str", "rdu"),
        "sampler_uses_model": ("bool", False),
        "model": ("str", "mamba"),
        "base_epochs": ("int", None),  # None: the model's default
        "options": ("table", {}),  # one table per strategy, e.g. [transfer.options.continual-kd]
    },
}
METRICS = ("top1", "top5", "earlier_top1")


def validate(cfg: dict[str, Any], registry: Any) -> None:
    from tcl.collect import budget_count

    check_data(cfg)
    tr = cfg["transfer"]
    if len(cfg["experiment"]["profiles"]) < 2:
        raise TclError("[experiment] profiles: a transfer sequence needs two or more")
    plugin(registry, cfg, "samplers", tr["sampler"])
    plugin(registry, cfg, "cost_models", tr["model"])
    for name in tr["strategies"]:
        plugin(registry, cfg, "transfer_strategies", name)
        registry.create("transfer_strategies", name, **tr["options"].get(name, {}))
    budget_count(tr["budget"], 1)


def _flat(row: Mapping[str, Any]) -> dict[str, float]:
    target = row["target"] or {}
    earlier = [e["top1"] for e in row["earlier"].values() if e]
    return {"top1": float(target.get("top1", np.nan)), "top5": float(target.get("top5", np.nan)),
            "earlier_top1": float(np.mean(earlier)) if earlier else np.nan,
            "train_s": float(row["train_s"]), "parameters": float(row["parameters"] or 0),
            "programs_measured": float(row["programs_measured"])}


def run(cfg: dict[str, Any], out_dir: Path, *, registry: Any, progress: Callable[[str], None]) -> dict[str, Any]:
    from tcl.transfer import load_platform, run_sequence, train_base

    exp, tr = cfg["experiment"], cfg["transfer"]
    rows = []
    first_train, _ = load_platform(Path(exp["data"]), exp["profiles"][0], exp["held_out"])
    bases = {}  # seed -> the first platform's model, trained once for all strategies
    for seed in exp["seeds"]:
        progress(f"base model on {exp['profiles'][0]}, seed {seed}")
        bases[seed] = train_base(first_train, model=tr["model"], base_epochs=tr["base_epochs"], seed=seed,
                                 threads=exp["threads"])
    for strategy in tr["strategies"]:
        per_seed = []
        for seed in exp["seeds"]:
            progress(f"{strategy}: {' -> '.join(exp['profiles'])}, seed {seed}")
            result = run_sequence(profiles=exp["profiles"], strategy=strategy, data_dir=Path(exp["data"]),
                                  budget=tr["budget"], sampler=tr["sampler"], held_out_networks=exp["held_out"],
                                  seed=seed, model=tr["model"], base_epochs=tr["base_epochs"],
                                  options=tr["options"].get(strategy, {}), threads=exp["threads"],
                                  sampler_uses_model=tr["sampler_uses_model"], base=bases[seed],
                                  eval_dir=eval_dir(cfg))
            per_seed.append(result["rows"])
        for i, first in enumerate(per_seed[0]):
            runs = [_flat(seed_rows[i]) for seed_rows in per_seed]
            rows.append({"strategy": first["strategy"], "profile": first["profile"],
                         **summarize(runs, METRICS, ("train_s", "parameters", "programs_measured"))})
    return {"rows": rows, "metric": "top1", "label": ["strategy", "profile"],
            "title": f"transfer {' -> '.join(exp['profiles'])}: Top-1 on held-out {', '.join(exp['held_out'])}"}
