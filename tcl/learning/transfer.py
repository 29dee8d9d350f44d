"""Moving a cost model across platforms: one transfer step, a sequence of them, and adapting
to this machine (docs/transfer.md).

Offline (records measured on every platform, e.g. data/bundled): per task, a sampler picks
``budget`` of the target platform's programs as "measured"; the rest is the unlabelled pool.
Tasks of held-out networks are never sampled and serve to score the model: Top-1/Top-5 on
the new platform and, for forgetting, on every earlier one. ``tcl adapt`` measures instead:
the sampler's picks of a candidate pool are timed on this machine with
:func:`tcl.learning.collect.collect` (resumable), then distilled into the teacher.

The core knows strategies only through the registry and the interfaces of
:mod:`tcl.api.interfaces`: a strategy's ``check(teacher)`` refuses a teacher before any work
starts; models answer ``platforms()``, ``for_platform(profile)`` (per-platform heads of
multi-task models) and ``parameter_count()``, whose defaults describe a model without them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import attrs

from tcl.api import defaults, discovery
from tcl.api.errors import TclError
from tcl.api.interfaces import CostModel, checked_selection
from tcl.api.programs import ProgramSet
from tcl.api.validation import budget_count
from tcl.learning.collect import collect
from tcl.learning.evaluation import load_checkpoint, score_records
from tcl.learning.record_sets import clean_records, split_by_network
from tcl.records.database import load_records
from tcl.records.pools import is_pool, load_pool, save_pool
from tcl.records.record_writer import RecordWriter

ADAPT_TASKS, ADAPT_POOL, ADAPT_RECORDS = "tasks", "pool", "records"


def load_platform(
    data_dir: Path, profile: str, held_out: Sequence[str] = (), eval_dir: Path | None = None
) -> tuple[ProgramSet, ProgramSet]:
    """``(train, held)``: a profile's successfully measured records, held-out networks' tasks
    apart; with ``eval_dir`` the held-out tasks are those networks' records there instead
    (e.g. data/idle, measured again on an idle machine)."""
    records, _ = clean_records(load_records(data_dir, profile=profile))
    if not records.tasks:
        raise TclError(f"{data_dir}: no successful records of profile {profile}")
    if not held_out:
        return records, ProgramSet(profile=profile)
    train, held = split_by_network(records, held_out)
    if eval_dir is not None:
        evaluation, _ = clean_records(load_records(eval_dir, profile=profile))
        _, held = split_by_network(evaluation, held_out)
    return train, held


def select_sample(
    records: ProgramSet, sampler: str, budget: float, *, model: CostModel | None = None, seed: int = 0
) -> tuple[ProgramSet, ProgramSet]:
    """``(sample, rest)``: per task, ``budget`` (fraction or count) of its programs chosen by
    ``sampler`` as the labelled sample; the others, their timings dropped, as the pool."""
    registry = discovery.registry()
    chooser = registry.create("samplers", sampler)
    picked: dict[str, list[int]] = {}
    rest = ProgramSet(profile=records.profile)
    for task, programs in records:
        take = budget_count(budget, len(programs))
        chosen = sorted(
            checked_selection(
                sampler,
                chooser.select(task, programs, take, model=model, seed=seed),
                pool_size=len(programs),
                budget=take,
            )
        )
        registry.hook.tcl_on_samples_selected(sampler=sampler, task=task.key, indices=chosen, pool_size=len(programs))
        picked[task.key] = chosen
        taken = set(chosen)
        rest.add(task, [attrs.evolve(p, run_secs=None) for i, p in enumerate(programs) if i not in taken])
    return records.subset(indices=picked), rest


def _strategy(
    name: str, has_teacher: bool, options: Mapping[str, Any] | None, teacher: CostModel | None = None
) -> tuple[Any, Any]:
    """``(registration, strategy object)``; refuses a missing or unfit teacher and bad options."""
    registry = discovery.registry()
    record = registry.get("transfer_strategies", name)
    if record.needs_teacher and not has_teacher:
        raise TclError(f"transfer strategy {name} needs a teacher checkpoint (--teacher)")
    chosen = registry.create("transfer_strategies", name, **dict(options or {}))
    if teacher is not None:
        chosen.check(teacher)
    return record, chosen


def transfer_step(
    strategy: str,
    teacher: CostModel | None,
    sample: ProgramSet,
    *,
    unlabelled: ProgramSet | None = None,
    history: Mapping[str, ProgramSet] | None = None,
    options: Mapping[str, Any] | None = None,
    seed: int = 0,
) -> tuple[CostModel, float, int]:
    """Run a strategy once; ``(model, training seconds, labelled programs trained on)``
    (``history`` is passed, and counted, only to strategies that need all platforms)."""
    record, chosen = _strategy(strategy, teacher is not None, options)
    if record.needs_all_platforms and not history:
        raise TclError(
            f"transfer strategy {strategy} needs the same programs measured on the earlier platforms; "
            f"none of the teacher's platforms ({', '.join(teacher.platforms()) or 'unknown'}) "
            f"has records in the data"
        )
    start = time.perf_counter()
    used = dict(history or {}) if record.needs_all_platforms else {}
    model = chosen.transfer(teacher, sample, unlabelled=unlabelled, history=used or None, seed=seed)
    return model, time.perf_counter() - start, len(sample) + sum(len(r) for r in used.values())


def _score(model: CostModel, held: ProgramSet) -> dict[str, Any] | None:
    return score_records(model, held) if held.tasks else None


def _notify(strategy: str, profile: str, row: Mapping[str, Any]) -> None:
    flat = {k: float(v) for k, v in row.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    for key in ("top1", "top5"):
        if row.get("target"):
            flat[f"target_{key}"] = float(row["target"][key])
    discovery.registry().hook.tcl_on_transfer_step(strategy=strategy, profile=profile, metrics=flat)


def transfer_once(
    *,
    strategy: str,
    teacher: Path | None,
    profile: str,
    data_dir: Path,
    out: Path,
    budget: float = 0.1,
    sampler: str = defaults.SAMPLER,
    held_out: Sequence[str] = (),
    seed: int = 0,
    options: Mapping[str, Any] | None = None,
    threads: int | None = 1,
    sampler_uses_model: bool = False,
) -> dict[str, Any]:
    """Teacher checkpoint + a ``budget`` sample of ``profile``'s records -> checkpoint ``out``.
    Returns the step's row: scores on held-out tasks (new platform and the teacher's), sizes, time.
    ``sampler_uses_model`` hands the teacher to the sampler (RDU's embedding and uncertainty;
    20 MC-dropout passes over every program, minutes on a small CPU)."""
    _strategy(strategy, teacher is not None, options)  # fail before any work
    teacher_model = load_checkpoint(teacher, threads=threads) if teacher is not None else None
    _strategy(strategy, teacher is not None, options, teacher_model)
    train, held = load_platform(data_dir, profile, held_out)
    sample, rest = select_sample(train, sampler, budget, model=teacher_model if sampler_uses_model else None, seed=seed)
    earlier = {}
    for platform in teacher_model.platforms() if teacher_model is not None else ():
        if platform != profile:
            try:
                earlier[platform] = load_platform(data_dir, platform, held_out)
            except TclError:  # the teacher's platform need not be in DATA (only mtl needs it)
                continue
    history = {p: tr for p, (tr, _held) in earlier.items()}
    model, seconds, trained = transfer_step(
        strategy, teacher_model, sample, unlabelled=rest, history=history, options=options, seed=seed
    )
    model.save(out)
    row = _row(strategy, profile, model, seconds, len(sample), trained, held, {p: h for p, (_tr, h) in earlier.items()})
    _notify(strategy, profile, row)
    return {
        **row,
        "checkpoint": str(out),
        "teacher": str(teacher) if teacher else None,
        "sampler": sampler,
        "budget": budget,
        "held_out": list(held_out),
    }


def _row(
    strategy: str,
    profile: str,
    model: CostModel,
    seconds: float,
    measured: int,
    trained: int,
    held: ProgramSet,
    earlier_held: Mapping[str, ProgramSet],
) -> dict[str, Any]:
    return {
        "profile": profile,
        "strategy": strategy,
        "target": _score(model, held),
        "earlier": {p: _score(model.for_platform(p), h) for p, h in earlier_held.items()},
        "parameters": model.parameter_count(),
        "train_s": round(seconds, 3),
        "programs_measured": measured,
        "programs_trained": trained,
    }


def train_base(
    records: ProgramSet,
    *,
    model: str = defaults.COST_MODEL,
    base_epochs: int | None = None,
    seed: int = 0,
    threads: int | None = 1,
) -> tuple[CostModel, float]:
    """The first platform's model of a sequence, trained on all its ``records``, and the
    seconds it took; strategies clone it, so one base serves every strategy of a study."""
    start = time.perf_counter()
    current = discovery.registry().create(
        "cost_models", model, threads=threads, **({"epochs": base_epochs} if base_epochs is not None else {})
    )
    current.fit(records, seed=seed)
    return current, time.perf_counter() - start


def run_sequence(
    *,
    profiles: Sequence[str],
    strategy: str,
    data_dir: Path,
    budget: float = 0.1,
    sampler: str = defaults.SAMPLER,
    held_out_networks: Sequence[str] = (),
    seed: int = 0,
    teacher: Path | None = None,
    model: str = defaults.COST_MODEL,
    base_epochs: int | None = None,
    options: Mapping[str, Any] | None = None,
    out_dir: Path | None = None,
    threads: int | None = 1,
    sampler_uses_model: bool = False,
    base: tuple[CostModel, float] | None = None,
    eval_dir: Path | None = None,
) -> dict[str, Any]:
    """Walk ``profiles`` in order: the first platform's model (``teacher``, ``base`` as
    :func:`train_base` returns it, or ``model`` trained on all its records) is carried to each
    next one with ``strategy`` and a ``budget`` sample. One row per platform: Top-1/Top-5 on its
    held-out tasks, on every earlier platform's (forgetting), parameters, training seconds,
    programs measured and trained on. ``eval_dir``: score held-out networks on their records
    there (see :func:`load_platform`)."""
    if len(profiles) < 2:
        raise TclError("a transfer sequence needs two or more profiles")
    _strategy(strategy, True, options)
    platforms = {p: load_platform(data_dir, p, held_out_networks, eval_dir) for p in profiles}
    first_train, first_held = platforms[profiles[0]]
    start = time.perf_counter()
    if teacher is not None:
        current = load_checkpoint(teacher, threads=threads)
        _strategy(strategy, True, options, current)
        base_seconds = time.perf_counter() - start
    elif base is not None:
        current, base_seconds = base
    else:
        current, base_seconds = train_base(
            first_train, model=model, base_epochs=base_epochs, seed=seed, threads=threads
        )
    rows = [_row("base", profiles[0], current, base_seconds, len(first_train), len(first_train), first_held, {})]
    for k, profile in enumerate(profiles[1:], 1):
        train, held = platforms[profile]
        sample, rest = select_sample(train, sampler, budget, model=current if sampler_uses_model else None, seed=seed)
        history = {p: platforms[p][0] for p in profiles[:k]}
        current, seconds, trained = transfer_step(
            strategy, current, sample, unlabelled=rest, history=history, options=options, seed=seed
        )
        if out_dir is not None:
            current.save(Path(out_dir) / f"{k}-{profile}")
        row = _row(
            strategy, profile, current, seconds, len(sample), trained, held, {p: platforms[p][1] for p in profiles[:k]}
        )
        _notify(strategy, profile, row)
        rows.append(row)
    return {
        "rows": rows,
        "strategy": strategy,
        "profiles": list(profiles),
        "budget": budget,
        "sampler": sampler,
        "held_out": list(held_out_networks),
        "seed": seed,
        "options": dict(options or {}),
    }


def adapt(
    *,
    profile: Any,
    teacher: Path,
    pool_dir: Path,
    out: Path,
    work_dir: Path,
    budget: float = 0.1,
    sampler: str = defaults.SAMPLER,
    strategy: str = defaults.TRANSFER_STRATEGY,
    options: Mapping[str, Any] | None = None,
    seed: int = 0,
    batch_size: int = 16,
    reporter: Any = None,
    threads: int | None = 1,
) -> dict[str, Any]:
    """Measure ``budget`` of a candidate pool on ``profile`` (this machine), chosen by ``sampler``,
    and distil ``teacher`` with them into checkpoint ``out``. The measurements live in
    ``work_dir`` (a private copy of the pool, its tasks, the records): a rerun measures only
    what is missing."""
    work_dir = Path(work_dir)
    pool_copy = work_dir / ADAPT_POOL
    source = None if is_pool(pool_copy) else load_pool(pool_dir)
    teacher_model = load_checkpoint(teacher, threads=threads)
    _strategy(strategy, True, options, teacher_model)  # refuse bad options or teacher before measuring
    if source is not None:  # collect notes the networks it measured in the pool: never in the shared one
        save_pool(pool_copy, source)
    pool = load_pool(pool_copy)
    if not len(pool):
        raise TclError(f"{pool_dir}: the candidate pool is empty")
    with RecordWriter(work_dir / ADAPT_TASKS) as writer:
        for task in pool.tasks.values():
            writer.add_workload(task)
    records_dir = work_dir / ADAPT_RECORDS
    stats = collect(
        profile=profile,
        network_names=[str(work_dir / ADAPT_TASKS)],
        pool_size=max(len(t) for t in pool.traces.values()),
        out_dir=records_dir,
        sampler_name=sampler,
        budget=budget,
        pool_dir=pool_copy,
        seed=seed,
        batch_size=batch_size,
        reporter=reporter,
        model=teacher_model.for_platform(profile.name),
    )
    measured, _ = clean_records(load_records(records_dir, profile=profile.name))
    if not measured.tasks:
        raise TclError(f"no candidate measured successfully on {profile.name}; see {records_dir}")
    model, seconds, trained = transfer_step(
        strategy, teacher_model, measured, unlabelled=pool.program_set(profile.name), options=options, seed=seed
    )
    model.save(out)
    row = {
        "profile": profile.name,
        "strategy": strategy,
        "parameters": model.parameter_count(),
        "train_s": round(seconds, 3),
        "programs_measured": len(measured),
        "programs_trained": trained,
        "measured_now": stats.measured,
        "failed_now": stats.failed,
        "already_measured": stats.skipped_done,
        "measured_under_load": stats.busy_measured,
    }
    _notify(strategy, profile.name, row)
    return {**row, "checkpoint": str(out), "work_dir": str(work_dir), "teacher": str(teacher)}
