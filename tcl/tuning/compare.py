"""Comparing tuning methods on one network and profile: one run each with the same trials, a
table of their results and the plot of their curves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from tcl.api import defaults
from tcl.api.errors import TclError
from tcl.api.profiles import HardwareProfile, get_profile
from tcl.measurement.networks import resolve_network
from tcl.records.stored_files import write_atomic
from tcl.tuning.curve import model_seconds, plot_curves
from tcl.tuning.methods import resolve_method
from tcl.tuning.tune import tune_network


def _time_to_reach(points: Sequence[Mapping[str, Any]], target_s: float | None, key: str) -> float | None:
    if target_s is None:
        return None
    for p in points:
        if p.get("estimate_s") is not None and p["estimate_s"] <= target_s * (1 + 1e-9):
            return float(p[key])
    return None


def compare(
    methods: Sequence[str],
    network: str,
    profile: Any,
    trials: int,
    out_dir: str | Path,
    *,
    online: bool = False,
    seed: int = 0,
    input_shape: Sequence[int] | None = None,
    trials_per_round: int | None = None,
    population: int = 512,
    repeats: int = 20,
    profiles_dir: Sequence[str] = (),
    report: Callable[[str], None] | None = None,
    baseline: str | None = None,
    torch_compile: bool = False,
    race: int = defaults.RACE_RECORDS,
) -> dict[str, Any]:
    """Tune ``network`` with each of ``methods`` in turn (each in ``out_dir/<label>``) and
    compare them with ``baseline`` (a method as given or its label; default the first):
    ``{"rows": [...], "baseline": label, ...}``. Each row's ``seconds_to_best_of`` also says
    when that method reached every method's final estimate (None: never), so one run answers
    "how much sooner than XGB" and "than Tenset-MLP" alike. Online fine-tuning applies to our
    checkpoints only. ``torch_compile`` times the network under torch.compile once (with the
    first method's run) and sets every row's ratio to it beside the one to torch eager."""
    if not methods:
        raise TclError("--compare needs at least one method")
    prof = profile if isinstance(profile, HardwareProfile) else get_profile(profile, profiles_dir)
    resolved = [resolve_method(m, prof.name, online) for m in methods]
    labels = [m.label for m in resolved]
    if len(set(labels)) != len(labels):
        raise TclError(f"--compare: methods repeat ({', '.join(labels)})")
    base_label = labels[baseline_index(baseline, methods, labels)]
    net = resolve_network(network, input_shape, seed)
    out_dir = Path(out_dir)
    results = {}
    for i, method in enumerate(resolved):
        results[method.label] = tune_network(
            net,
            prof,
            method,
            trials,
            out_dir / method.label,
            seed=seed,
            trials_per_round=trials_per_round,
            population=population,
            repeats=repeats,
            report=report,
            plot=False,
            torch_compile=torch_compile and i == 0,
            race=race,
        )
    peer = results[labels[0]]
    base = results[base_label]
    base_best = base["estimate_s"]
    base_time = _time_to_reach(base["curve"]["points"], base_best, "seconds")
    rows = []
    for label in labels:
        r = results[label]
        to_each = {
            other: _time_to_reach(r["curve"]["points"], results[other]["estimate_s"], "seconds") for other in labels
        }
        t = to_each[base_label]
        n = _time_to_reach(r["curve"]["points"], base_best, "trials")
        rows.append(
            {
                "method": label,
                "measured_trials": r["measured_trials"],
                "tuning_s": r["tuning_s"],
                "estimate_ms": _ms(r["estimate_s"]),
                "latency_ms": _ms(r["latency_s"]),
                "torch_ms": _ms(r["torch_latency_s"]),
                "vs_torch": r["torch_latency_s"] / r["latency_s"],
                "vs_torch_compile": (
                    peer["torch_compile_latency_s"] / r["latency_s"] if "torch_compile_latency_s" in peer else None
                ),
                "time_to_baseline_best_s": t,
                "trials_to_baseline_best": n,
                "search_speedup": (base_time / t) if (t and base_time) else None,
                "latency_vs_baseline": base["latency_s"] / r["latency_s"],
                "race_gain": _race_gain(r["race"]),
                "seconds_to_best_of": to_each,
                "cost_model_s": model_seconds(r["cost_model_stats"]),
                "rounds_under_load": r["rounds_under_load"],
            }
        )
    summary = {"network": base["network"], "profile": prof.name, "trials": trials, "baseline": base_label, "rows": rows}
    if torch_compile:
        summary["torch_compile_ms"] = _ms(peer.get("torch_compile_latency_s"))
        summary["torch_compile_error"] = peer.get("torch_compile_error")
    write_atomic(out_dir / "compare.json", json.dumps({**summary, "results": results}, indent=1) + "\n")
    plot_curves(results, out_dir / "compare.png", title=f"{base['network']} on {prof.name}, {trials} trials")
    return summary


def baseline_index(baseline: str | None, methods: Sequence[str], labels: Sequence[str]) -> int:
    """Which of the compared methods is the baseline: ``baseline`` names one as given or by
    its label; None is the first."""
    if baseline is None:
        return 0
    for i, (method, label) in enumerate(zip(methods, labels)):
        if baseline in (method, label):
            return i
    raise TclError(f"baseline {baseline!r} is not one of the compared methods ({', '.join(labels)})")


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3


def _race_gain(race: Mapping[str, Any] | None) -> float | None:
    """How much faster the network the race kept ran than the one of the best records, timed
    side by side in the race (1.0: the best records were kept; None: no race)."""
    if race is None:
        return None
    return race["best_records_s"] / race["raced_s"] if race["kept"] else 1.0
