"""Offline sampling: choose a subset of already-measured programs with a sampler, to study
samplers without measuring again. The subset is written as a TVM JSONDatabase like any other
records, so `tcl train` trains on it unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from tcl import discovery
from tcl.collect import budget_count
from tcl.errors import TclError
from tcl.interfaces import CostModel, MeasureResult
from tcl.programs import ProgramSet


@attrs.frozen
class SampleSummary:
    tasks: int
    pool: int
    selected: int


def sample_offline(records: ProgramSet, sampler_name: str, budget: float, out_dir: Path, *,
                   model: CostModel | None = None, seed: int = 0, target: Any = None,
                   sampler_options: dict[str, Any] | None = None) -> SampleSummary:
    """Per task, ``budget`` of its programs (fraction or count) chosen by the sampler."""
    from tcl.database import RecordWriter, read_manifest

    registry = discovery.registry()
    sampler = registry.create("samplers", sampler_name, **(sampler_options or {}))
    if not records.tasks:
        raise TclError("no records to sample from")
    if out_dir.exists() and any(out_dir.iterdir()):
        raise TclError(f"{out_dir} is not empty; choose a new directory for the subset")
    chosen: dict[str, list[int]] = {}
    for task, programs in records:
        take = budget_count(budget, len(programs))
        chosen[task.key] = sorted(sampler.select(task, programs, take, model=model, seed=seed))
        registry.hook.tcl_on_samples_selected(sampler=sampler_name, task=task.key, indices=chosen[task.key],
                                              pool_size=len(programs))
    with RecordWriter(out_dir, profile=records.profile) as writer:
        from tcl.database import update_manifest

        update_manifest(out_dir, tasks=list(records.tasks.values()), sampler=sampler_name, budget=budget, seed=seed)
        for task, programs in records:
            entries = [(programs[i].trace, MeasureResult(run_secs=programs[i].run_secs, error_kind=None)
                        if programs[i].ok else MeasureResult(run_secs=None, error_kind="unknown",
                                                             error_msg=programs[i].error))
                       for i in chosen[task.key]]
            if entries:
                writer.add(task, entries, target=target)
    return SampleSummary(tasks=len(records.tasks), pool=len(records), selected=sum(map(len, chosen.values())))
