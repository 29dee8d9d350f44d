"""``kind = "models"``: cost models trained on the same records, scored on held-out networks
and, with ``[models] folds``, by leave-networks-out cross-validation.

Per profile, seed and model: a fresh model trained on every program of the training
networks and scored on the held-out ones (row ``split = "held-out"``). With ``folds = N``,
the training networks are also dealt into N folds; each fold's networks are scored by a model
trained on the other folds, and the row ``split = "cv"`` scores every training task by the
model that never saw its network. Each row: mean and std over seeds, the 95% interval of that
mean (bootstrap over tasks), the score of a random ranking (``chance_*``) and training time;
``[experiment] jobs`` runs that many profiles at once. ``variants`` names a model under other
settings so that it runs beside itself (e.g. Mamba trained with another loss).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from tcl.api import defaults
from tcl.api.errors import TclError
from tcl.experiments._common import (
    METRICS,
    RECORDS,
    check_data,
    map_jobs,
    model_options,
    resolve_variants,
    split,
    summarize,
)

SCHEMA = {
    "experiment": RECORDS,
    # options: one table per model name, e.g. [models.options.mamba] epochs = 10
    # folds: 0 = held-out networks only; N >= 2 = also N-fold leave-networks-out cross-validation
    # variants: named settings of a model, listed in names like a plugin, e.g.
    # [models.variants.mamba-listmle] plugin = "mamba", loss = "listmle"
    "models": {
        "names": ("list[str]", list(defaults.MODEL_COMPARISON)),
        "options": ("table", {}),
        "folds": ("int", 0),
        "variants": ("table", {}),
    },
}


def validate(cfg: dict[str, Any], registry: Any) -> None:
    check_data(cfg)
    names, options, folds = cfg["models"]["names"], cfg["models"]["options"], cfg["models"]["folds"]
    if not names:
        raise TclError("[models] names must not be empty")
    if folds < 0 or folds == 1:
        raise TclError(f"[models] folds must be 0 (no cross-validation) or 2 or more, got {folds}")
    extra = sorted(set(options) - set(names))
    if extra:
        raise TclError(f"[models.options] has tables for {', '.join(extra)}, which [models] names does not list")
    models(registry, cfg)


def models(registry: Any, cfg: Mapping[str, Any]) -> dict[str, tuple[str, dict]]:
    """``{listed name: (cost model plugin, its options)}``, each checked by building it once."""
    spec = cfg["models"]
    return resolve_variants(registry, cfg, "cost_models", "models", spec["names"], spec["variants"], spec["options"])


def fold_networks(train: Any, folds: int) -> list[list[str]]:
    """The training networks dealt round-robin (sorted by name) into ``folds`` groups."""
    networks = sorted({n for task in train.tasks.values() for n in task.networks})
    if len(networks) < folds:
        raise TclError(
            f"[models] folds = {folds} but the training records hold only {len(networks)} networks "
            f"({', '.join(networks)})"
        )
    return [networks[i::folds] for i in range(folds)]


def _fit_predict(registry: Any, name: str, options: Mapping[str, Any], train: Any, held: Any, seed: int):
    from tcl.learning.evaluation import predict_records

    model = registry.create("cost_models", name, **options)
    start = time.perf_counter()
    model.fit(train, None, seed=seed)
    return predict_records(model, held), time.perf_counter() - start


def _row(predictions: Sequence[Any], fit_s: Sequence[float]) -> dict[str, Any]:
    """Mean and std over seeds of each metric, the 95% interval of the mean, chance."""
    from tcl.learning.metric_intervals import bootstrap_intervals, chance_scores
    from tcl.learning.metrics import evaluate

    first = predictions[0]
    if not first.latencies:
        raise TclError("no task with two or more programs and a successful measurement to score")
    context = {"weights": first.weights, "networks": first.networks}
    runs = [
        {**{k: float(v) for k, v in evaluate(p.latencies, p.scores, **context).items() if k in METRICS}, "fit_s": s}
        for p, s in zip(predictions, fit_s)
    ]
    row = summarize(runs)
    intervals = bootstrap_intervals(first.latencies, [p.scores for p in predictions], **context)
    chance = chance_scores(first.latencies, **context)
    for metric in METRICS:
        row[f"{metric}_low"], row[f"{metric}_high"] = intervals[metric]
        row[f"chance_{metric}"] = chance[metric]
    row["held_tasks"] = len(first.latencies)
    return row


def _one_profile(cfg: Mapping[str, Any], profile: str, progress: Callable[[str], None]) -> list[dict[str, Any]]:
    """The rows of one profile: every model over every seed, held-out split then folds."""
    from tcl.api.discovery import registry as current_registry
    from tcl.learning.evaluation import Predictions
    from tcl.learning.record_sets import split_by_network
    from tcl.learning.training import torch_threads

    registry, exp, folds = current_registry(), cfg["experiment"], cfg["models"]["folds"]
    rows = []
    with torch_threads(exp["threads"]):
        train, held = split(cfg, profile)
        groups = fold_networks(train, folds) if folds else []
        for name, (model, settings) in models(registry, cfg).items():
            options = model_options(cfg, settings)
            predictions, fit_s = [], []
            for seed in exp["seeds"]:
                progress(f"{profile}: {name}, seed {seed}")
                p, s = _fit_predict(registry, model, options, train, held, seed)
                predictions.append(p)
                fit_s.append(s)
            rows.append(
                {
                    "profile": profile,
                    "model": name,
                    "split": "held-out",
                    "programs": len(train),
                    **_row(predictions, fit_s),
                }
            )
            progress(
                f"{profile}: {name} top1 {rows[-1]['top1']:.4f} "
                f"[{rows[-1]['top1_low']:.4f}, {rows[-1]['top1_high']:.4f}]"
            )
            if not groups:
                continue
            predictions, fit_s = [], []
            for seed in exp["seeds"]:
                merged, seconds = Predictions(), 0.0
                for i, group in enumerate(groups):
                    progress(f"{profile}: {name}, seed {seed}, fold {i + 1}/{len(groups)} ({', '.join(group)})")
                    rest, fold = split_by_network(train, group)
                    p, s = _fit_predict(registry, model, options, rest, fold, seed)
                    merged.update(p)
                    seconds += s
                predictions.append(merged)
                fit_s.append(seconds / len(groups))
            rows.append(
                {
                    "profile": profile,
                    "model": name,
                    "split": "cv",
                    "programs": len(train),
                    "folds": len(groups),
                    **_row(predictions, fit_s),
                }
            )
            progress(
                f"{profile}: {name} cross-validated top1 {rows[-1]['top1']:.4f} "
                f"[{rows[-1]['top1_low']:.4f}, {rows[-1]['top1_high']:.4f}]"
            )
    return rows


def run(cfg: dict[str, Any], out_dir: Path, *, registry: Any, progress: Callable[[str], None]) -> dict[str, Any]:
    exp = cfg["experiment"]
    per_profile = map_jobs(
        _one_profile, [(cfg, profile) for profile in exp["profiles"]], exp["profiles"], exp["jobs"], progress
    )
    return {
        "rows": [row for rows in per_profile for row in rows],
        "metric": "top1",
        "label": ["profile", "model", "split"],
        "title": f"Top-1, held out: {', '.join(exp['held_out'])}" + (", and CV" if cfg["models"]["folds"] else ""),
        "held_out": exp["held_out"],
    }
