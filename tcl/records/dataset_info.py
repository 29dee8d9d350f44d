"""Summaries of record directories: what `tcl dataset info` prints."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from tcl.api.programs import ProgramSet
from tcl.records.database import find_databases, load_records
from tcl.records.manifest import read_manifest
from tcl.records.program_keys import program_key
from tcl.records.splits import Split

NO_PROFILE = "(none)"


def summarize(path: Path, split: Split | None = None) -> dict[str, Any]:
    """Per profile: tasks, programs per task, failures by kind, networks, what collection runs
    saw (load, programs timed again) and, with ``split``, the same counts per part; plus the
    distinct programs over all profiles (a program measured on several counts once) and the
    size on disk."""
    databases = find_databases(path)
    manifests = {db: read_manifest(db) or {} for db in databases}
    by_profile: dict[str, list[Path]] = {}
    for db in databases:
        by_profile.setdefault(manifests[db].get("profile") or NO_PROFILE, []).append(db)
    profiles = {}
    distinct: set[tuple[str, str]] = set()
    for profile, dbs in sorted(by_profile.items()):
        if profile != NO_PROFILE:
            records = load_records(path, profile=profile)
        else:  # plain TVM directories: no manifest to group by, so each is read alone
            records = ProgramSet()
            for db in dbs:
                for task, progs in load_records(db):
                    records.add(task, progs)
        profiles[profile] = _summarize_set(records, dbs)
        runs_of = {db: manifests[db].get("runs", []) for db in dbs}
        if any(runs_of.values()):
            profiles[profile]["runs"] = _summarize_runs([run for runs in runs_of.values() for run in runs])
            profiles[profile]["tasks_on_several_cpus"] = _tasks_on_several_cpus(records, runs_of)
        if split is not None:
            profiles[profile]["split"] = _summarize_parts(records, dbs, split)
        distinct.update((task.key, program_key(p.trace)) for task, progs in records for p in progs)
    return {
        "path": str(path),
        "databases": len(databases),
        "bytes": _size(path),
        "distinct_programs": len(distinct),
        "profiles": profiles,
    }


def _summarize_parts(records: ProgramSet, dbs: list[Path], split: Split) -> dict[str, Any]:
    by_network: dict[str, set[str]] = {}
    for task in records.tasks.values():
        for network in task.networks:
            by_network.setdefault(network, set()).add(task.key)
    parts = split.assign_tasks(by_network)
    out = {}
    for part, keys in parts.items():
        subset = records.subset(sorted(keys))
        summary = _summarize_set(subset, dbs)
        out[part] = {k: summary[k] for k in ("tasks", "programs", "measured_ok", "programs_per_task", "networks")}
    return out


def _summarize_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals over the collection runs recorded in the manifests (``tcl collect``)."""
    return {
        "count": len(runs),
        "seconds": round(sum(r.get("seconds", 0) for r in runs), 1),
        "idle_only": all(r.get("idle_only") for r in runs),
        "busy_measured": sum(r.get("busy_measured", 0) for r in runs),
        "retimed": sum(r.get("retimed", 0) for r in runs),
        "commits": sorted({r["commit"] for r in runs if r.get("commit")}),
        "cpu_models": sorted({r["cpu_model"] for r in runs if r.get("cpu_model")}),
        "first": min((r["started"] for r in runs if r.get("started")), default=None),
    }


def _tasks_on_several_cpus(records: ProgramSet, runs_of: dict[Path, list[dict[str, Any]]]) -> list[str] | None:
    """Names of the tasks whose programs were timed on more than one CPU model, so that their
    labels mix two machines' speeds; ``None`` where the manifest cannot tell. A collection
    appends each run's records in order and its manifest entry counts them (``measured``),
    so the runs cover the record file's lines in turn."""
    cpu_at: dict[str, tuple[np.ndarray, list[Any]]] = {}
    for db, runs in runs_of.items():
        ends = np.cumsum([r.get("measured", 0) for r in runs])
        cpu_at[str(db)] = (ends, [r.get("cpu_model") for r in runs])
    several = []
    for task, progs in records:
        cpus = set()
        for q in progs:
            folder, _, line = (q.location or "").rpartition(":")
            ends, models = cpu_at.get(str(Path(folder).parent), (np.array([]), []))
            run = int(np.searchsorted(ends, int(line), side="left")) if line.isdigit() else len(models)
            if run >= len(models):  # a line no run accounts for
                return None
            cpus.add(models[run])
        if len(cpus) > 1:
            several.append(task.name)
    return sorted(several)


def _summarize_set(records: ProgramSet, dbs: list[Path]) -> dict[str, Any]:
    per_task = np.array([len(p) for _, p in records] or [0])
    ok_per_task = np.array([sum(q.ok for q in p) for _, p in records] or [0])
    failures = Counter((q.error or "unknown").split(":", 1)[0] for _, progs in records for q in progs if not q.ok)
    networks = sorted({n for task, _ in records for n in task.networks})
    return {
        "directories": [str(d) for d in dbs],
        "tasks": len(records.tasks),
        "programs": int(per_task.sum()) if records.tasks else 0,
        "measured_ok": int(ok_per_task.sum()) if records.tasks else 0,
        "programs_per_task": {
            "min": int(per_task.min()),
            "median": float(np.median(per_task)),
            "max": int(per_task.max()),
        },
        "ok_per_task_min": int(ok_per_task.min()),
        "failures": dict(sorted(failures.items())),
        "networks": networks,
    }


def _size(path: Path) -> int:
    total = 0
    for dirpath, _, filenames in os.walk(path):
        total += sum(os.path.getsize(os.path.join(dirpath, f)) for f in filenames)
    return total
