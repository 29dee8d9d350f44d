"""``kind = "transfer"``: transfer strategies compared over one sequence of platforms.

For each strategy and seed, :func:`tcl.learning.transfer.run_sequence` trains the base model on the
first profile and carries it to each next one with a ``budget`` sample. Rows: per strategy
and platform, Top-1/Top-5/pairwise accuracy on that platform's held-out tasks and, averaged
over the earlier platforms, Top-1 and pairwise on theirs (forgetting); mean and std over
seeds. ``[experiment] jobs`` runs that many seeds at once in separate processes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from tcl.api import defaults
from tcl.api.errors import TclError
from tcl.experiments import plugin
from tcl.experiments._common import RECORDS, check_data, eval_dir, map_jobs, resolve_variants, summarize

SCHEMA = {
    "experiment": RECORDS,
    "transfer": {
        "strategies": ("list[str]", list(defaults.TRANSFER_COMPARISON)),
        "budget": ("number", 0.1),
        "sampler": ("str", defaults.SAMPLER),
        "sampler_uses_model": ("bool", False),
        "model": ("str", defaults.COST_MODEL),
        "base_epochs": ("count", None),  # None: the model's default
        "options": ("table", {}),  # one table per strategy, e.g. [transfer.options.continual-kd]
        # named settings of a strategy, listed in strategies like a plugin, e.g.
        # [transfer.variants.kd-pool] plugin = "continual-kd", distill_on = "pool"
        "variants": ("table", {}),
    },
}
METRICS = ("top1", "top5", "pairwise", "earlier_top1", "earlier_pairwise")


def validate(cfg: dict[str, Any], registry: Any) -> None:
    from tcl.api.validation import budget_count

    check_data(cfg)
    tr = cfg["transfer"]
    if len(cfg["experiment"]["profiles"]) < 2:
        raise TclError("[experiment] profiles: a transfer sequence needs two or more")
    plugin(registry, cfg, "samplers", tr["sampler"])
    plugin(registry, cfg, "cost_models", tr["model"])
    strategies(registry, cfg)
    budget_count(tr["budget"], 1)


def strategies(registry: Any, cfg: dict[str, Any]) -> dict[str, tuple[str, dict]]:
    """``{listed name: (strategy plugin, its options)}``, checked."""
    tr = cfg["transfer"]
    return resolve_variants(
        registry, cfg, "transfer_strategies", "transfer", tr["strategies"], tr["variants"], tr["options"]
    )


def _flat(row: Mapping[str, Any]) -> dict[str, float]:
    target = row["target"] or {}
    earlier = [e for e in row["earlier"].values() if e]

    def earlier_mean(metric: str) -> float:
        return float(np.mean([e[metric] for e in earlier])) if earlier else np.nan

    return {
        **{m: float(target.get(m, np.nan)) for m in ("top1", "top5", "pairwise")},
        "earlier_top1": earlier_mean("top1"),
        "earlier_pairwise": earlier_mean("pairwise"),
        "train_s": float(row["train_s"]),
        "parameters": float(row["parameters"] or 0),
        "programs_measured": float(row["programs_measured"]),
    }


def _kept_per_platform(steps: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Accuracy kept on *each* earlier platform after one step (``steps``: that step's row per
    seed); the step's own row holds only their mean."""
    first = steps[0]
    return [
        {
            "strategy": first["strategy"],
            "after": first["profile"],
            "on": platform,
            **summarize(
                [{m: float(step["earlier"][platform][m]) for m in ("top1", "pairwise")} for step in steps],
                ("top1", "pairwise"),
                (),
            ),
        }
        for platform, scores in first["earlier"].items()
        if scores
    ]


def _one_seed(
    cfg: Mapping[str, Any], plan: Mapping[str, tuple[str, dict]], seed: int, progress: Callable[[str], None]
) -> dict[str, list[dict[str, Any]]]:
    """Every listed strategy's sequence for one seed: ``{name: rows}`` (``plan`` as
    :func:`strategies` gives it). The first platform's model is trained once and shared by all."""
    from tcl.learning.transfer import load_platform, run_sequence, train_base

    exp, tr = cfg["experiment"], cfg["transfer"]
    first_train, _ = load_platform(Path(exp["data"]), exp["profiles"][0], exp["held_out"])
    progress(f"base model on {exp['profiles'][0]}, seed {seed}")
    base = train_base(first_train, model=tr["model"], base_epochs=tr["base_epochs"], seed=seed, threads=exp["threads"])
    out = {}
    for name, (strategy, options) in plan.items():
        progress(f"{name}: {' -> '.join(exp['profiles'])}, seed {seed}")
        rows = run_sequence(
            profiles=exp["profiles"],
            strategy=strategy,
            data_dir=Path(exp["data"]),
            budget=tr["budget"],
            sampler=tr["sampler"],
            held_out_networks=exp["held_out"],
            seed=seed,
            model=tr["model"],
            base_epochs=tr["base_epochs"],
            options=options,
            threads=exp["threads"],
            sampler_uses_model=tr["sampler_uses_model"],
            base=base,
            eval_dir=eval_dir(cfg),
        )["rows"]
        out[name] = [{**row, "strategy": name} if row["strategy"] == strategy else row for row in rows]
    return out


def run(cfg: dict[str, Any], out_dir: Path, *, registry: Any, progress: Callable[[str], None]) -> dict[str, Any]:
    exp, tr = cfg["experiment"], cfg["transfer"]
    plan = strategies(registry, cfg)
    per_seed = map_jobs(
        _one_seed,
        [(cfg, plan, seed) for seed in exp["seeds"]],
        [f"seed {seed}" for seed in exp["seeds"]],
        exp["jobs"],
        progress,
    )
    rows, forgetting = [], []
    for strategy in tr["strategies"]:
        for i, first in enumerate(per_seed[0][strategy]):
            steps = [seed_rows[strategy][i] for seed_rows in per_seed]
            rows.append(
                {
                    "strategy": first["strategy"],
                    "profile": first["profile"],
                    **summarize(
                        [_flat(step) for step in steps], METRICS, ("train_s", "parameters", "programs_measured")
                    ),
                }
            )
            forgetting += _kept_per_platform(steps)
    return {
        "rows": rows,
        "forgetting": forgetting,
        "metric": "top1",
        "label": ["strategy", "profile"],
        "title": f"transfer {' -> '.join(exp['profiles'])}, held-out {', '.join(exp['held_out'])}, "
        f"{len(exp['seeds'])} seed{'s' if len(exp['seeds']) > 1 else ''}",
    }


def plot(results: Mapping[str, Any], path: Path) -> None:
    """One panel per metric (Top-1 and pairwise on the new platform, pairwise kept on the
    earlier ones): a group of bars per platform, one bar per strategy, seed std as error bars.
    Pairwise sits beside Top-1 because it is the stable one on a few held-out tasks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in results["rows"] if r["strategy"] != "base"]
    strategies = list(dict.fromkeys(r["strategy"] for r in rows))
    platforms = list(dict.fromkeys(r["profile"] for r in rows))
    panels = [
        ("top1", "Top-1 on the new platform"),
        ("pairwise", "pairwise on the new platform"),
        ("earlier_pairwise", "pairwise kept on earlier platforms"),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8))
    width = 0.8 / len(strategies)
    for ax, (metric, title) in zip(axes, panels):
        for i, strategy in enumerate(strategies):
            found = {r["profile"]: r for r in rows if r["strategy"] == strategy}
            xs = [p + (i - (len(strategies) - 1) / 2) * width for p in range(len(platforms))]
            ax.bar(
                xs,
                [found[p][metric] for p in platforms],
                width,
                label=strategy,
                yerr=[found[p][f"{metric}_std"] for p in platforms],
                capsize=2,
            )
        ax.set_xticks(range(len(platforms)), platforms)
        ax.set_title(title, fontsize=10)
        ax.set_ylim(0.5 if "pairwise" in metric else 0, 1.0)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=len(strategies), fontsize=8)
    fig.suptitle(results.get("title", "transfer"), fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)
