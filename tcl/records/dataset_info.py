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

NO_PROFILE = "(none)"


def summarize(path: Path) -> dict[str, Any]:
    """Per profile: tasks, programs per task, failures by kind, networks; plus size on disk."""
    databases = find_databases(path)
    by_profile: dict[str, list[Path]] = {}
    for db in databases:
        by_profile.setdefault((read_manifest(db) or {}).get("profile") or NO_PROFILE, []).append(db)
    profiles = {}
    for profile, dbs in sorted(by_profile.items()):
        if profile != NO_PROFILE:
            profiles[profile] = _summarize_set(load_records(path, profile=profile), dbs)
        else:  # plain TVM directories: no manifest to group by, so each is read alone
            merged = ProgramSet()
            for db in dbs:
                for task, progs in load_records(db):
                    merged.add(task, progs)
            profiles[profile] = _summarize_set(merged, dbs)
    return {"path": str(path), "databases": len(databases), "bytes": _size(path), "profiles": profiles}


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
