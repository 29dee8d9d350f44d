"""Preparing records for training without torch: held-out splits by task, program or network,
a fingerprint of a dataset, and dropping programs no model can learn from (failures,
invalid times, tasks with a single program).
"""

from __future__ import annotations

import hashlib
from typing import Mapping, Sequence

import numpy as np

from tcl.api.errors import TclError
from tcl.api.programs import Program, ProgramSet
from tcl.records.database import INVALID_KIND


def split_by_task(records: ProgramSet, fraction: float = 0.1, seed: int = 0) -> tuple[ProgramSet, ProgramSet]:
    """``(train, valid)``: a seeded random ``fraction`` of the tasks (at least one, never all
    when there are two or more) goes to ``valid``; programs of a task stay together."""
    if not 0.0 <= fraction < 1.0:
        raise ValueError("fraction must be in [0, 1)")
    keys = sorted(records.tasks)
    n_valid = 0
    if fraction > 0 and len(keys) >= 2:
        n_valid = min(max(1, round(fraction * len(keys))), len(keys) - 1)
    perm = np.random.default_rng(seed).permutation(len(keys))
    valid_keys = {keys[i] for i in perm[:n_valid]}
    train = records.subset([k for k in records.tasks if k not in valid_keys])
    valid = records.subset([k for k in records.tasks if k in valid_keys])
    return train, valid


def split_programs(records: ProgramSet, fraction: float = 0.2, seed: int = 0) -> tuple[ProgramSet, ProgramSet]:
    """``(train, test)`` within tasks: a seeded random ``fraction`` of each task's programs
    (at least one when the task has two or more) is held out. For checking that a model
    learns a task's landscape; :func:`split_by_task` checks generalisation to unseen tasks."""
    if not 0.0 <= fraction < 1.0:
        raise ValueError("fraction must be in [0, 1)")
    train_idx: dict[str, list[int]] = {}
    test_idx: dict[str, list[int]] = {}
    for key in records.tasks:
        n = len(records.programs.get(key, ()))
        k = min(max(1, round(fraction * n)), n - 1) if (fraction > 0 and n >= 2) else 0
        perm = np.random.default_rng([seed, int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)]).permutation(n)
        test_idx[key] = sorted(perm[:k].tolist())
        train_idx[key] = sorted(perm[k:].tolist())
    return records.subset(indices=train_idx), records.subset(indices=test_idx)


def split_by_network(records: ProgramSet, held_out: Sequence[str]) -> tuple[ProgramSet, ProgramSet]:
    """``(train, held)``: tasks that occur in any of the ``held_out`` networks (per
    ``Task.networks``) go to ``held``, even when other networks share them."""
    held_set = set(held_out)
    known = {n for t in records.tasks.values() for n in t.networks}
    unknown = sorted(held_set - known)
    if unknown:
        raise TclError(
            f"network(s) {', '.join(unknown)} not in the records; networks there: {', '.join(sorted(known)) or 'none'}"
        )
    in_held = [k for k, t in records.tasks.items() if held_set & set(t.networks)]
    held_keys = set(in_held)
    return records.subset([k for k in records.tasks if k not in held_keys]), records.subset(in_held)


def dataset_fingerprint(records: ProgramSet) -> str:
    """A short hash of which tasks and measurements a model was trained on."""
    h = hashlib.sha256()
    for key in sorted(records.tasks):
        lats = sorted(p.latency for p in records.programs.get(key, ()))
        h.update(key.encode())
        h.update(np.asarray(lats, dtype=np.float64).round(12).tobytes())
    return h.hexdigest()[:16]


def clean_records(records: ProgramSet) -> tuple[ProgramSet, dict[str, int]]:
    """Only programs with a finite positive latency; counts of what was dropped.

    Counts: ``programs`` (in), ``failed`` (error or no run time), ``nonfinite`` (NaN, inf,
    <= 0 or non-numeric run times, records the loader marked invalid included), ``tasks``
    (in), ``tasks_without_success`` and ``single_program_tasks`` (tasks left with exactly one
    program).
    """
    out = ProgramSet(profile=records.profile)
    c = dict(
        programs=0, failed=0, nonfinite=0, tasks=len(records.tasks), tasks_without_success=0, single_program_tasks=0
    )
    for task, progs in records:
        ok: list[Program] = []
        for p in progs:
            c["programs"] += 1
            if (p.error is None and p.run_secs and not p.ok) or (p.error or "").startswith(f"{INVALID_KIND}:"):
                c["nonfinite"] += 1
            elif p.error is not None or not p.run_secs:
                c["failed"] += 1
            else:
                ok.append(p)
        if not ok:
            c["tasks_without_success"] += 1
            continue
        if len(ok) == 1:
            c["single_program_tasks"] += 1
        out.add(task, ok)
    return out, c


def describe_counts(c: Mapping[str, int]) -> str:
    """One phrase: what came in and what was left out, e.g. ``600 programs in 3 tasks read;
    excluded 5 failed programs; 1 single-program task skipped for the ranking loss``."""
    parts = [f"{c['programs']} programs in {c['tasks']} tasks read"]
    dropped = []
    if c.get("failed"):
        dropped.append(f"{c['failed']} failed")
    if c.get("nonfinite"):
        dropped.append(f"{c['nonfinite']} invalid-time")
    if dropped:
        parts.append("excluded " + " and ".join(dropped) + " programs")
    if c.get("tasks_without_success"):
        parts.append(f"{c['tasks_without_success']} tasks without a successful program")
    if c.get("single_program_tasks"):
        parts.append(f"{c['single_program_tasks']} single-program tasks skipped for the ranking loss")
    return "; ".join(parts)
