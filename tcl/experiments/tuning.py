"""``kind = "tuning"``: tune one network with several cost models and compare them.

A thin wrapper of :func:`tcl.tune.compare` per profile and seed (each in
``OUT/<profile>/seed-<seed>/``); its rows (time to the baseline's best, latencies,
speedups) come back tagged with profile and seed, and its own curves plot stays there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from tcl.errors import TclError
from tcl.experiments import plugin
from tcl.experiments._common import EXPERIMENT

SCHEMA = {
    "experiment": EXPERIMENT,
    "tuning": {
        "network": ("str", "resnet-18"),
        "methods": ("list[str]", ["xgb", "random"]),  # tuned in this order; names or checkpoint dirs
        "baseline": ("str", None),  # the method (as listed, or its label) others are compared with; default first
        "trials": ("int", 64),
        "online": ("bool", False),
        "trials_per_round": ("int", None),
        "population": ("int", 512),
        "repeats": ("int", 20),
    },
}


def _methods(cfg: dict[str, Any]) -> list[str]:
    """Methods with checkpoint paths made relative to the config file."""
    base = Path(cfg["experiment"]["config_file"]).parent
    return [str((base / m).resolve()) if "/" in m else m for m in cfg["tuning"]["methods"]]


def validate(cfg: dict[str, Any], registry: Any) -> None:
    from tcl.tune import baseline_index, resolve_method

    tun = cfg["tuning"]
    if not tun["methods"] or tun["trials"] < 1:
        raise TclError("[tuning] methods must not be empty and trials must be at least 1")
    if ":" not in tun["network"]:
        plugin(registry, cfg, "networks", tun["network"])
    for method in tun["methods"]:
        if method in registry.names("cost_models"):
            plugin(registry, cfg, "cost_models", method)
    methods = _methods(cfg)
    for profile in cfg["experiment"]["profiles"]:
        labels = [resolve_method(method, profile, tun["online"]).label for method in methods]
        baseline_index(_baseline(cfg), methods, labels)


def _baseline(cfg: dict[str, Any]) -> str | None:
    """The baseline, a checkpoint path made relative to the config file like the methods."""
    listed = cfg["tuning"]["baseline"]
    if listed is None or listed not in cfg["tuning"]["methods"]:
        return listed
    return _methods(cfg)[cfg["tuning"]["methods"].index(listed)]


def run(cfg: dict[str, Any], out_dir: Path, *, registry: Any, progress: Callable[[str], None]) -> dict[str, Any]:
    from tcl.tune import compare

    exp, tun = cfg["experiment"], cfg["tuning"]
    rows = []
    for profile in exp["profiles"]:
        for seed in exp["seeds"]:
            result = compare(_methods(cfg), tun["network"], profile, tun["trials"],
                             out_dir / profile / f"seed-{seed}", online=tun["online"], seed=seed,
                             trials_per_round=tun["trials_per_round"], population=tun["population"],
                             repeats=tun["repeats"], report=progress, baseline=_baseline(cfg))
            rows.extend({"profile": profile, "seed": seed, **row} for row in result["rows"])
    return {"rows": rows, "metric": "latency_vs_baseline", "label": ["profile", "seed", "method"],
            "title": f"{tun['network']}, {tun['trials']} trials: baseline ({result['baseline']}) latency / method latency"}
