"""``kind = "tuning"``: tune one network with several cost models and compare them.

A thin wrapper of :func:`tcl.tuning.compare.compare` per profile and seed (each in
``OUT/<profile>/seed-<seed>/``); its rows (time to the baseline's best, latencies,
speedups) come back tagged with profile and seed, and its own curves plot stays there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from tcl.api import defaults
from tcl.api.errors import TclError
from tcl.experiments import plugin
from tcl.experiments._common import EXPERIMENT

SCHEMA = {
    "experiment": EXPERIMENT,
    "tuning": {
        "network": ("str", defaults.TUNING_NETWORK),  # a registered network or path/file.py:ClassName
        "input_shape": ("list[int]", None),  # a file network's, unless it has example_inputs()
        "methods": ("list[str]", ["xgb", "random"]),  # tuned in this order; names or checkpoint dirs
        "baseline": ("str", None),  # the method (as listed, or its label) others are compared with; default first
        "trials": ("int", 64),
        "online": ("bool", False),
        "trials_per_round": ("int", None),
        "population": ("int", 512),
        "repeats": ("int", 20),
        "torch_compile": ("bool", False),  # also time torch.compile (inductor): rows gain vs_torch_compile
        "race": ("int", defaults.RACE_RECORDS),  # each task's best records raced inside the compiled network (1: none)
    },
}


def _methods(cfg: dict[str, Any]) -> list[str]:
    """Methods with checkpoint paths made relative to the config file."""
    base = Path(cfg["experiment"]["config_file"]).parent
    return [str((base / m).resolve()) if "/" in m else m for m in cfg["tuning"]["methods"]]


def _network(cfg: dict[str, Any]) -> tuple[str, bool]:
    """The network and whether it is a user's file (path/file.py:ClassName), whose path is
    then made relative to the config file like the methods."""
    from tcl.measurement.networks import file_network

    network = cfg["tuning"]["network"]
    in_file = file_network(network)
    if in_file is None:
        return network, False
    path, cls_name = in_file
    return f"{(Path(cfg['experiment']['config_file']).parent / path).resolve()}:{cls_name}", True


def validate(cfg: dict[str, Any], registry: Any) -> None:
    from tcl.measurement.networks import resolve_network
    from tcl.tuning.compare import baseline_index
    from tcl.tuning.methods import resolve_method

    tun = cfg["tuning"]
    if not tun["methods"] or tun["trials"] < 1:
        raise TclError("[tuning] methods must not be empty and trials must be at least 1")
    if tun["race"] < 1:
        raise TclError(f"[tuning] race must be at least 1 (1: each task's best record as it is), got {tun['race']}")
    network, is_file = _network(cfg)
    if not is_file:
        plugin(registry, cfg, "networks", network)
    else:  # the file, its class, the module built from it and its inputs, checked as tcl tune checks them
        resolve_network(network, tun["input_shape"])
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
    from tcl.tuning.compare import compare

    exp, tun = cfg["experiment"], cfg["tuning"]
    rows = []
    for profile in exp["profiles"]:
        for seed in exp["seeds"]:
            result = compare(
                _methods(cfg),
                _network(cfg)[0],
                profile,
                tun["trials"],
                out_dir / profile / f"seed-{seed}",
                online=tun["online"],
                seed=seed,
                input_shape=tun["input_shape"],
                trials_per_round=tun["trials_per_round"],
                population=tun["population"],
                repeats=tun["repeats"],
                report=progress,
                baseline=_baseline(cfg),
                torch_compile=tun["torch_compile"],
                race=tun["race"],
            )
            rows.extend({"profile": profile, "seed": seed, **_flat(row)} for row in result["rows"])
    return {
        "rows": rows,
        "metric": "latency_vs_baseline",
        "label": ["profile", "seed", "method"],
        "title": f"{tun['network']}, {tun['trials']} trials: baseline ({result['baseline']}) latency / method latency",
    }


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    """One scalar column per compared method (``s_to_<method>_best``) for the nested
    ``seconds_to_best_of``, so results tables and files stay one value per cell."""
    flat = {key: value for key, value in row.items() if key != "seconds_to_best_of"}
    return {**flat, **{f"s_to_{method}_best": seconds for method, seconds in row["seconds_to_best_of"].items()}}
