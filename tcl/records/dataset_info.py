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
from tcl.records.timing_cpus import cpus_of_records, keep_one_cpu_per_task

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
            records = load_records(path, profile=profile, one_cpu_per_task=False)
        else:  # plain TVM directories: no manifest to group by, so each is read alone
            records = ProgramSet()
            for db in dbs:
                for task, progs in load_records(db):
                    records.add(task, progs)
        runs = [run for db in dbs for run in manifests[db].get("runs", [])]
        cpus = cpus_of_records(records, {db: manifests[db] for db in dbs}) if runs else None
        several = None
        if cpus is not None:  # as every reader of the records sees them
            records, lost = keep_one_cpu_per_task(records, cpus)
            several = sorted(lost)
        profiles[profile] = _summarize_set(records, dbs)
        if runs:
            profiles[profile]["runs"] = _summarize_runs(runs)
            profiles[profile]["tasks_on_several_cpus"] = several
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
