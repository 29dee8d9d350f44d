"""Which CPU timed each record, and one CPU per task.

A task's labels are its programs' latencies relative to its fastest, so they only mean
something when one machine timed them all. A collection appends each run's records in order
and the run's manifest entry counts them (``measured``) with the CPU model it ran on, so the
runs cover the record file's lines in turn. A dataset collected over several machines (a VM
is not always the same CPU) can thus tell which CPU timed each record
(:func:`cpus_of_records`); :func:`keep_one_cpu_per_task` keeps, of a task timed on several,
the records of the CPU that timed it last. A collection that resumes such a task first times
its earlier programs again (:func:`tcl.learning.collect.collect`), so nothing is lost.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from tcl.api.programs import Program, ProgramSet
from tcl.records.program_keys import program_key


def cpus_of_records(records: ProgramSet, manifests: Mapping[Path, Mapping[str, Any]]) -> dict[str, list[str]] | None:
    """Per task key, the CPU model that timed each of its programs (in the set's order), from
    the manifests of the record directories (``{directory: manifest}``); ``None`` when some
    record is accounted for by no run (a directory without runs, a run killed before it
    counted its records)."""
    runs_at: dict[str, tuple[np.ndarray, list[str]]] = {}
    for db, manifest in manifests.items():
        runs = manifest.get("runs", [])
        ends = np.cumsum([r.get("measured", 0) for r in runs])
        runs_at[str(db)] = (ends, [str(r.get("cpu_model")) for r in runs])
    out: dict[str, list[str]] = {}
    for task, programs in records:
        cpus = out[task.key] = []
        for program in programs:
            folder, _, line = (program.location or "").rpartition(":")
            ends, models = runs_at.get(str(Path(folder).parent), (np.array([]), []))
            run = int(np.searchsorted(ends, int(line), side="left")) if line.isdigit() else len(models)
            if run >= len(models):
                return None
            cpus.append(models[run])
    return out


def timed_on(programs: list[Program], models: list[str], cpu: str) -> tuple[list[Program], set[str]]:
    """The programs ``cpu`` timed, and the keys of the task's other programs it never timed
    (an earlier CPU's programs that a cut to ``cpu`` would leave out)."""
    ours = [p for p, model in zip(programs, models) if model == cpu]
    keys_ours = {program_key(p.trace) for p in ours}
    missing = {program_key(p.trace) for p, model in zip(programs, models) if model != cpu} - keys_ours
    return ours, missing


def keep_one_cpu_per_task(records: ProgramSet, cpus: Mapping[str, list[str]]) -> tuple[ProgramSet, Counter[str]]:
    """``records`` with each task timed on several CPUs cut to the records of the CPU that
    timed its last record, and per such task (by name) how many of its programs that cut
    leaves out (programs the kept CPU also timed are not lost, only their older records)."""
    kept = ProgramSet(profile=records.profile)
    lost: Counter[str] = Counter()
    for task, programs in records:
        models = cpus[task.key]
        if len(set(models)) > 1:
            programs, missing = timed_on(programs, models, models[-1])
            if missing:
                lost[task.name] = len(missing)
        kept.add(task, programs)
    return kept, lost
