"""``kind = "sampling"``: how much a cost model loses when trained on a sample.

Per profile and seed: a sampler picks ``budget`` of every training task's programs in
``rounds`` active-learning rounds (looking up the recorded latencies; a sampler that needs a
model gets one trained on what was picked so far), a fresh model is trained on the pick and
scored on the held-out networks; ``full`` adds the model trained on 100%. Rows: mean and
std over seeds. ``[experiment] jobs`` runs that many profiles at once. ``variants`` names
other settings of a sampler (e.g. RDU's criterion pairs) that ``samplers`` can list beside
the plugins.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from tcl.api import defaults
from tcl.experiments._common import (
    RECORDS,
    check_data,
    check_model,
    fit_score,
    map_jobs,
    model_options,
    resolve_variants,
    split,
    summarize,
)

SCHEMA = {
    "experiment": RECORDS,
    "model": {"name": ("str", defaults.COST_MODEL), "options": ("table", {})},
    "sampling": {
        "budget": ("number", 0.1),
        "rounds": ("count", 2),
        "samplers": ("list[str]", list(defaults.SAMPLING_ABLATION)),
        "full": ("bool", True),
        # named settings of a sampler, listed in samplers like a plugin, e.g.
        # [sampling.variants.rdu-rd] plugin = "rdu", w_u = 0
        "variants": ("table", {}),
    },
}


def validate(cfg: dict[str, Any], registry: Any) -> None:
    from tcl.api.validation import budget_count
    from tcl.learning.sampling import round_quotas

    check_data(cfg)
    check_model(registry, cfg, cfg["model"]["name"], cfg["model"]["options"])
    samplers(registry, cfg)
    budget_count(cfg["sampling"]["budget"], 1)
    round_quotas(0, cfg["sampling"]["rounds"])


def samplers(registry: Any, cfg: dict[str, Any]) -> dict[str, tuple[str, dict]]:
    """``{listed name: (sampler plugin, its options)}``, checked; the whole-pool sampler last when ``full``."""
    smp = cfg["sampling"]
    return resolve_variants(
        registry,
        cfg,
        "samplers",
        "sampling",
        smp["samplers"] + ([defaults.MEASURE_ALL] if smp["full"] else []),
        smp["variants"],
    )


def _one_profile(
    cfg: Mapping[str, Any], plans: Sequence[tuple], profile: str, progress: Callable[[str], None]
) -> list[dict[str, Any]]:
    """The rows of one profile: every plan ``(listed name, plugin, options, budget, rounds)``
    over every seed."""
    from tcl.api.discovery import registry as current_registry
    from tcl.learning.sampling import active_learning_offline
    from tcl.learning.training import torch_threads

    registry, exp = current_registry(), cfg["experiment"]
    name, options = cfg["model"]["name"], model_options(cfg, cfg["model"]["options"])
    rows = []
    with torch_threads(exp["threads"]):
        train, held = split(cfg, profile)
        for sampler, chosen, sampler_options, budget, rounds in plans:
            guided = registry.get("samplers", chosen).needs_model
            runs, programs = [], 0
            for seed in exp["seeds"]:
                progress(f"{profile}: {sampler} {budget:g}, seed {seed}")
                picks = active_learning_offline(
                    train,
                    registry.create("samplers", chosen, **sampler_options),
                    budget,
                    rounds=rounds,
                    model_name=name if guided else None,
                    model_options=options,
                    seed=seed,
                    progress=progress,
                )
                subset = train.subset(indices=picks)
                programs = len(subset)
                runs.append(fit_score(registry, name, options, subset, held, seed))
            rows.append(
                {
                    "profile": profile,
                    "sampler": sampler,
                    "budget": budget,
                    "programs": programs,
                    "of": len(train),
                    "held_tasks": len(held.tasks),
                    **summarize(runs),
                }
            )
            progress(f"{profile}: {sampler} top1 {rows[-1]['top1']:.4f} +- {rows[-1]['top1_std']:.4f}")
    return rows


def run(cfg: dict[str, Any], out_dir: Path, *, registry: Any, progress: Callable[[str], None]) -> dict[str, Any]:
    exp, smp = cfg["experiment"], cfg["sampling"]
    full = {defaults.MEASURE_ALL: (1.0, 1)} if smp["full"] else {}  # the 100% row: everything in one round
    plans = [
        (listed, chosen, sampler_options, *full.get(listed, (smp["budget"], smp["rounds"])))
        for listed, (chosen, sampler_options) in samplers(registry, cfg).items()
    ]
    per_profile = map_jobs(
        _one_profile, [(cfg, plans, profile) for profile in exp["profiles"]], exp["profiles"], exp["jobs"], progress
    )
    name = cfg["model"]["name"]
    return {
        "rows": [row for rows in per_profile for row in rows],
        "metric": "top1",
        "label": ["profile", "sampler"],
        "title": f"{name}: Top-1 on held-out {', '.join(exp['held_out'])}",
        "held_out": exp["held_out"],
        "model": name,
    }
