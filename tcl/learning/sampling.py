"""Offline sampling: choose a subset of already-measured programs with a sampler, to study
samplers without measuring again. The subset is written as a TVM JSONDatabase like any other
records, so `tcl train` trains on it unchanged.

Active learning offline (:func:`active_learning_offline`) replays select -> measure -> train
-> select on measured records: "measuring" a chosen program is looking up its recorded
latency, so sampler studies cost training time only."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import attrs

from tcl.api import discovery
from tcl.api.errors import TclError
from tcl.api.interfaces import CostModel, checked_selection
from tcl.api.programs import MeasureResult, ProgramSet
from tcl.api.validation import budget_count
from tcl.records.manifest import update_manifest
from tcl.records.record_writer import RecordWriter
from tcl.records.staging import require_new_directory, staged_directory


def round_quotas(take: int, rounds: int) -> list[int]:
    """Programs to pick in each round so that the rounds together pick exactly ``take``
    (near-equal shares; earlier rounds never get fewer than later ones)."""
    if rounds < 1:
        raise TclError(f"rounds must be at least 1, got {rounds}")
    base, extra = divmod(take, rounds)
    return [base + (r < extra) for r in range(rounds)]


def train_round_model(
    records: ProgramSet, model_name: str, options: dict[str, Any] | None, seed: int
) -> CostModel | None:
    """A fresh ``model_name`` model fitted on ``records`` (no validation split: the rounds'
    samples are small); None when no task has two programs to rank."""
    if not any(sum(p.ok for p in progs) >= 2 for _, progs in records):
        return None
    model = discovery.registry().create("cost_models", model_name, **(options or {}))
    model.fit(records, None, seed=seed)
    return model


def active_learning_offline(
    records: ProgramSet,
    sampler: Any,
    budget: float,
    *,
    rounds: int = 1,
    model_name: str | None = None,
    model_options: dict[str, Any] | None = None,
    model: CostModel | None = None,
    seed: int = 0,
    progress: Callable[[str], None] = lambda _: None,
    sampler_name: str | None = None,
) -> dict[str, list[int]]:
    """Per task, ``budget`` (fraction or count) of its programs chosen in ``rounds`` rounds.

    Round r+1 gets the programs chosen so far as ``measured=`` and, when ``model_name`` is
    given (and a registered sampler is named, one registered with ``needs_model``), a fresh
    ``model_name`` model trained (``seed``) on their recorded latencies;
    ``model`` is what round 1 gets. ``sampler`` is a sampler object or a registered name;
    ``sampler_name`` names an object in errors (default: its ``name`` or class).
    Returns sorted pool indices per task key.
    """
    registry = discovery.registry()
    if isinstance(sampler, str):
        sampler_name = sampler
        if not registry.get("samplers", sampler).needs_model:
            model_name = None  # as in tcl collect and tcl run: no model is trained for a sampler that takes none
        sampler = registry.create("samplers", sampler)
    elif sampler_name is None:
        sampler_name = getattr(sampler, "name", type(sampler).__name__)
    if model_name is not None:
        registry.get("cost_models", model_name)
    if not records.tasks:
        raise TclError("no records to sample from")
    quotas = {key: round_quotas(budget_count(budget, len(progs)), rounds) for key, progs in records.programs.items()}
    chosen: dict[str, list[int]] = {key: [] for key in records.tasks}
    for r in range(rounds):
        if r and model_name is not None:
            picked = records.subset(indices=chosen)
            progress(f"round {r + 1}/{rounds}: training {model_name} on {len(picked)} programs")
            model = train_round_model(picked, model_name, model_options, seed) or model
        for task, programs in records:
            take = quotas[task.key][r]
            if take == 0:
                continue
            new = checked_selection(
                sampler_name,
                sampler.select(task, programs, take, measured=chosen[task.key], model=model, seed=seed + r),
                pool_size=len(programs),
                budget=take,
                measured=chosen[task.key],
            )
            registry.hook.tcl_on_samples_selected(
                sampler=sampler_name, task=task.key, indices=list(new), pool_size=len(programs)
            )
            chosen[task.key] = sorted(chosen[task.key] + list(new))
        progress(f"round {r + 1}/{rounds}: {sum(map(len, chosen.values()))} programs chosen")
    return chosen


@attrs.frozen
class SampleSummary:
    tasks: int
    pool: int
    selected: int


def sample_offline(
    records: ProgramSet,
    sampler_name: str,
    budget: float,
    out_dir: Path,
    *,
    model: CostModel | None = None,
    seed: int = 0,
    target: Any = None,
    sampler_options: dict[str, Any] | None = None,
    rounds: int = 1,
    model_name: str | None = None,
    model_options: dict[str, Any] | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> SampleSummary:
    """Per task, ``budget`` of its programs (fraction or count) chosen by the sampler, in
    ``rounds`` active-learning rounds (see :func:`active_learning_offline`), written to the
    new directory ``out_dir`` whole or not at all (:mod:`tcl.records.staging`)."""
    sampler = discovery.registry().create("samplers", sampler_name, **(sampler_options or {}))
    require_new_directory(Path(out_dir), "subset")
    chosen = active_learning_offline(
        records,
        sampler,
        budget,
        rounds=rounds,
        model_name=model_name,
        model_options=model_options,
        model=model,
        seed=seed,
        sampler_name=sampler_name,
        progress=progress,
    )
    with staged_directory(out_dir, "subset") as staging, RecordWriter(staging, profile=records.profile) as writer:
        update_manifest(staging, tasks=list(records.tasks.values()), sampler=sampler_name, budget=budget, seed=seed)
        for task, programs in records:
            entries = [
                (
                    programs[i].trace,
                    MeasureResult(run_secs=programs[i].run_secs, error_kind=None)
                    if programs[i].ok
                    else MeasureResult(run_secs=None, error_kind="unknown", error_msg=programs[i].error),
                )
                for i in chosen[task.key]
            ]
            if entries:
                writer.add(task, entries, target=target)
    return SampleSummary(tasks=len(records.tasks), pool=len(records), selected=sum(map(len, chosen.values())))
