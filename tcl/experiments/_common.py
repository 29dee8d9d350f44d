"""What the experiment kinds share: the [experiment] table, loading one profile's records
split into training and held-out networks, fitting and scoring one model, mean and std."""

from __future__ import annotations

import functools
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from tcl.api.discovery import singular
from tcl.api.errors import TclError
from tcl.api.programs import ProgramSet
from tcl.experiments import REQUIRED, plugin

EXPERIMENT = {
    "kind": ("str", REQUIRED),
    "name": ("str", ""),
    "description": ("str", ""),
    "profiles": ("list[str]", REQUIRED),
    "seeds": ("list[int]", [0]),
    "threads": ("count", 1),  # torch threads per process
}
# kinds that train on records: where they are and which networks are kept out
RECORDS = {
    **EXPERIMENT,
    "data": ("path", REQUIRED),
    # the held-out networks: listed here, or the test part of a split file (data/split.toml)
    "held_out": ("list[str]", []),
    "split": ("path", None),
    "feature_cache": ("path", None),  # None: tcl's default feature cache
    # score held-out networks on their records in this directory instead of those in data
    # (e.g. data/idle: the same programs measured again on an idle machine)
    "eval_data": ("path", None),
    # independent units run at once, one process each: profiles (models, sampling) or seeds (transfer)
    "jobs": ("count", 1),
}

METRICS = ("top1", "top5", "pairwise")


def check_data(cfg: Mapping[str, Any]) -> None:
    """Every profile has records under ``data`` (and ``eval_data``) and every held-out
    network occurs there. A ``split`` file fills ``held_out`` with its test networks (so
    config.resolved.json names them)."""
    exp = cfg["experiment"]
    if exp["split"] is not None:
        from tcl.records.splits import load_split

        if exp["held_out"]:
            raise TclError("[experiment] give held_out or split, not both")
        exp["held_out"] = list(load_split(exp["split"]).test)
    if not exp["profiles"] or not exp["seeds"] or not exp["held_out"]:
        raise TclError("[experiment] profiles, seeds and held_out (or split) must not be empty")
    for key in ("data", "eval_data"):
        if exp[key] is not None:
            _check_networks(key, Path(exp[key]), exp["profiles"], exp["held_out"])


def _check_networks(key: str, data: Path, profiles: Sequence[str], held_out: Sequence[str]) -> None:
    from tcl.records.database import find_databases
    from tcl.records.manifest import read_manifest

    networks: dict[str, set[str]] = {}
    for db in find_databases(data):
        manifest = read_manifest(db) or {}
        if manifest.get("profile"):
            nets = networks.setdefault(manifest["profile"], set())
            nets.update(n for t in manifest.get("tasks", ()) for n in t.get("networks", ()))
    for profile in profiles:
        if profile not in networks:
            raise TclError(
                f"[experiment] {key}: no records of '{profile}' under {data}; "
                f"profiles there: {', '.join(sorted(networks)) or 'none'}"
            )
        missing = sorted(set(held_out) - networks[profile])
        if missing:
            where = "" if key == "data" else f" of {key} {data}"
            raise TclError(
                f"[experiment] held_out: {', '.join(missing)} not in the {profile} records{where}; "
                f"networks there: {', '.join(sorted(networks[profile]))}"
            )


def map_jobs(
    work: Callable[..., Any], units: Sequence[tuple], labels: Sequence[str], jobs: int, progress: Callable[[str], None]
) -> list[Any]:
    """``work(*unit, progress)`` for every unit, results in order. With ``jobs`` > 1, that many
    spawned processes share the units; each prints its progress to stderr behind ``[label]``
    (the parent's callback cannot cross processes)."""
    jobs = min(jobs, len(units))
    if jobs <= 1:
        return [work(*unit, progress) for unit in units]
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [
            pool.submit(work, *unit, functools.partial(_to_stderr, f"[{label}] ")) for unit, label in zip(units, labels)
        ]
        return [f.result() for f in futures]


def _to_stderr(prefix: str, line: str) -> None:
    print(f"{prefix}{line}", file=sys.stderr, flush=True)


def eval_dir(cfg: Mapping[str, Any]) -> Path | None:
    value = cfg["experiment"]["eval_data"]
    return None if value is None else Path(value)


def check_model(registry: Any, cfg: dict[str, Any], name: str, options: Mapping[str, Any]) -> None:
    """The cost model exists and accepts ``options`` (building one trains nothing)."""
    _check_built(registry, cfg, "cost_models", name, name, model_options(cfg, options))


def _check_built(registry: Any, cfg: dict[str, Any], point: str, chosen: str, listed: str, options: Mapping) -> None:
    """Plugin ``chosen`` exists and builds with ``options``; a refused option is blamed on the
    name the config lists (``listed``: the plugin's own name or a variant's)."""
    plugin(registry, cfg, point, chosen)
    try:
        registry.create(point, chosen, **options)
    except TclError as exc:
        raise TclError(f"options of {singular(point)} {listed}: {exc}") from None


def resolve_variants(
    registry: Any,
    cfg: dict[str, Any],
    point: str,
    table: str,
    names: Sequence[str],
    variants: Mapping[str, Any],
    options: Mapping[str, Any] | None = None,
) -> dict[str, tuple[str, dict]]:
    """``{name: (plugin, options)}`` for the listed names, each checked by building it once.

    A name is a plugin (its options from ``options[name]``) or a key of ``variants``: a table
    ``{plugin = "...", <that plugin's options>}``, so one plugin can be compared with itself
    under other settings in one run (e.g. RDU without uncertainty beside RDU)."""
    resolved = {}
    for name in names:
        if name in variants:
            spec = variants[name]
            if not isinstance(spec, dict) or not isinstance(spec.get("plugin"), str):
                choices = ", ".join(registry.names(point))
                raise TclError(f'[{table}] variants.{name} needs plugin = "<one of {choices}>"')
            if name in registry.entries[point]:
                raise TclError(f"[{table}] variants.{name}: a plugin has that name; give the variant another")
            chosen, kwargs = spec["plugin"], {k: v for k, v in spec.items() if k != "plugin"}
        else:
            if name not in registry.entries[point] and variants:
                raise TclError(
                    f"[{table}] unknown name '{name}'; plugins: {', '.join(registry.names(point))}; "
                    f"variants: {', '.join(variants)}"
                )
            chosen, kwargs = name, dict((options or {}).get(name, {}))
        _check_built(registry, cfg, point, chosen, name, kwargs)
        resolved[name] = (chosen, kwargs)
    return resolved


def model_options(cfg: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    from tcl.records.feature_cache import default_cache_dir

    cache = cfg["experiment"]["feature_cache"] or str(default_cache_dir())
    return {"verbose": False, "cache_dir": cache, **options}


def split(cfg: Mapping[str, Any], profile: str) -> tuple[ProgramSet, ProgramSet]:
    """(training networks, held-out networks) of ``profile``'s measured records; the held-out
    ones from ``eval_data`` when it is set."""
    from tcl.learning.record_sets import split_by_network
    from tcl.records.database import load_records

    exp = cfg["experiment"]
    train, held = split_by_network(load_records(exp["data"], profile=profile).measured(), exp["held_out"])
    if exp["eval_data"] is not None:
        _, held = split_by_network(load_records(exp["eval_data"], profile=profile).measured(), exp["held_out"])
    return train, held


def fit_score(
    registry: Any,
    name: str,
    options: Mapping[str, Any],
    train: ProgramSet,
    held: ProgramSet,
    seed: int,
    *,
    per_task: bool = False,
) -> dict[str, Any]:
    """Train a fresh model (no validation split: fixed epochs, best training loss kept) and
    score it on the held-out networks; ``per_task`` adds each task's Top-1 (``{name: top1}``)."""
    from tcl.learning.evaluation import score_records

    model = registry.create("cost_models", name, **options)
    start = time.perf_counter()
    model.fit(train, None, seed=seed)
    fit_s = time.perf_counter() - start
    result = score_records(model, held, per_task=per_task)
    scores: dict[str, Any] = {**{k: float(result[k]) for k in METRICS}, "fit_s": fit_s}
    if per_task:
        scores["per_task"] = {t["task"]: t["top1"] for t in result["per_task"]}
    return scores


def summarize(
    runs: Sequence[Mapping[str, float]], metrics: Sequence[str] = METRICS, extra: Sequence[str] = ("fit_s",)
) -> dict[str, float]:
    """Mean over seeds of each of ``metrics`` with its sample std (0 for one seed), and the
    mean of each of ``extra``."""
    out: dict[str, float] = {}
    for key in (*metrics, *extra):
        values = np.array([r[key] for r in runs], dtype=np.float64)
        out[key] = float(values.mean())
        if key in metrics:
            out[f"{key}_std"] = float(values.std(ddof=1)) if values.size > 1 else 0.0
    out["seeds"] = len(runs)
    return out
