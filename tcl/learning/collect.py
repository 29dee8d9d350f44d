"""Collection: build candidate pools for networks' tasks and measure what a sampler picks.

Resumable by construction: the record directory is the truth. Each batch is appended and
fsynced before the next starts; on a rerun the programs already in the records (matched to
the pool by program key) count as measured and are never measured again.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import attrs

from tcl.api import defaults, discovery, validation
from tcl.api.errors import TclError, one_line
from tcl.api.interfaces import NetworkDefinition, checked_selection
from tcl.api.profiles import HardwareProfile
from tcl.api.programs import MeasureResult, Task
from tcl.learning.sampling import round_quotas, train_round_model
from tcl.measurement.candidates import generate_pool_with_stats
from tcl.measurement.interrupts import deferred_interrupt
from tcl.measurement.machine_load import BUSY_CORES, OtherLoad, timing_turn
from tcl.measurement.networks import INPUT_SHAPE_NEEDS_FILE, file_network, resolve_network
from tcl.measurement.tasks import extract_tasks
from tcl.records.database import WORKLOAD_FILE, load_records
from tcl.records.manifest import add_run, cpu_model, read_manifest, source_revision, timestamp, update_manifest
from tcl.records.pools import Pool, extend_pool, is_pool, load_pool, make_task, trace_to_schedule
from tcl.records.record_writer import RecordWriter
from tcl.records.stored_files import stored_file
from tcl.records.timing_cpus import cpus_of_records, timed_on

POOL_SUBDIR = "pool"
#: Seconds between load checks while waiting for other processes to finish (``idle_only``).
IDLE_POLL_S = 5.0


@attrs.frozen
class NetworkTasks:
    """A network's tuning tasks: (task, weight in this network) pairs."""

    network: str
    tasks: tuple[tuple[Task, int], ...]


def network_tasks(
    name: str | tuple[str, NetworkDefinition],
    profile: HardwareProfile,
    *,
    include_simple_tasks: bool = False,
    input_shape: Sequence[int] | None = None,
) -> NetworkTasks:
    """Tasks of a registered network, of a user's model file (``path/file.py:ClassName``, fed
    ``input_shape`` or its ``example_inputs()``), or of the workloads in a TVM JSONDatabase directory.
    A ``(name, definition)`` pair, as :func:`resolve_network` returns it, is used as it is."""
    if isinstance(name, tuple):
        name, definition = name
    elif Path(name).is_dir():
        records = load_records(Path(name))
        if not records.tasks:
            raise TclError(f"{name}: no TVM JSONDatabase workloads found")
        return NetworkTasks(Path(name).name, tuple((t, int(t.weight)) for t in records.tasks.values()))
    else:
        name, definition = resolve_network(name, input_shape if file_network(name) else None)

    extracted = extract_tasks(definition, profile.tvm_target(), include_simple_tasks=include_simple_tasks)
    return NetworkTasks(
        name,
        tuple(
            (make_task(t.mod, name=f"{name}/{t.name}", weight=t.weight, networks=(name,)), t.weight) for t in extracted
        ),
    )


def merge_networks(suites: Iterable[NetworkTasks]) -> tuple[list[Task], dict[str, dict[str, Any]]]:
    """One task per workload key (weights summed, networks joined) and per-network weights."""
    merged: dict[str, Task] = {}
    networks: dict[str, dict[str, Any]] = {}
    for suite in suites:
        networks[suite.network] = {"tasks": {t.key: w for t, w in suite.tasks}}
        for task, weight in suite.tasks:
            if task.key in merged:
                old = merged[task.key]
                merged[task.key] = attrs.evolve(
                    old, weight=old.weight + weight, networks=tuple(dict.fromkeys(old.networks + task.networks))
                )
            else:
                merged[task.key] = task
    return list(merged.values()), networks


def interleave(tasks: Sequence[Task], suites: Sequence[NetworkTasks]) -> list[Task]:
    """Tasks round-robin over networks (each network's own order: most work first), so that
    the first N tasks (``--max-tasks``) cover every network."""
    by_key = {t.key: t for t in tasks}
    order: dict[str, Task] = {}
    queues = [[t.key for t, _ in suite.tasks] for suite in suites]
    while any(queues):
        for queue in queues:
            while queue:
                key = queue.pop(0)
                if key not in order:
                    order[key] = by_key[key]
                    break
    return list(order.values())


def ensure_pool(
    pool_dir: Path,
    tasks: Sequence[Task],
    networks: dict[str, Any],
    profile: HardwareProfile,
    size: int,
    seed: int,
    progress: Callable[[str], None] = lambda _: None,
    *,
    model: Any = None,
    random_fraction: float | None = None,
) -> Any:
    """Load the pool at ``pool_dir`` and add candidates for tasks it lacks, appending each new
    task to the directory as it is generated (an interrupted run keeps what it generated).

    ``model`` (a CostModel) guides the evolutionary part of new pools; ``random_fraction``
    caps the share of random samples (see :func:`tcl.measurement.candidates.generate_pool`)."""
    max_random = None if random_fraction is None else math.ceil(random_fraction * size)
    pool = load_pool(pool_dir) if is_pool(pool_dir) else Pool(meta={"target": profile.target, "seed": seed})
    missing = [t for t in tasks if t.key not in pool.tasks]
    known_networks = dict(pool.meta.get("networks", {}))
    unsaved = bool(missing) or any(n not in known_networks for n in networks)
    known_networks.update(networks)
    pool.meta["networks"] = known_networks
    for i, task in enumerate(missing, 1):
        progress(f"pool {i}/{len(missing)}: {task.name}")
        found, stats = generate_pool_with_stats(
            task.module(), profile.tvm_target(), size, seed=seed, max_random=max_random, model=model
        )
        pool.add(task, found, stats.origins)
        extend_pool(pool_dir, pool, meta=pool.meta)
    if unsaved:
        extend_pool(pool_dir, pool, meta=pool.meta)
    return pool


@attrs.define
class CollectStats:
    measured: int = 0
    failed: int = 0
    skipped_done: int = 0
    seconds: float = 0.0
    busy_measured: int = 0  # programs timed while other processes took >= BUSY_CORES cores
    busy_cores: float = 0.0  # the most cores other processes took during one batch
    retimed: int = 0  # programs timed again because other processes took the CPU (idle_only)
    other_cpu: int = 0  # programs timed again because another CPU model timed them before


def collect(
    *,
    profile: HardwareProfile,
    network_names: Sequence[str],
    pool_size: int,
    out_dir: Path,
    sampler_name: str = defaults.MEASURE_ALL,
    budget: float = 1.0,
    pool_dir: Path | None = None,
    seed: int = 0,
    batch_size: int = 16,
    include_simple_tasks: bool = False,
    max_tasks: int | None = None,
    reporter: Any = None,
    rounds: int = 1,
    model_name: str = defaults.COST_MODEL,
    model_options: dict[str, Any] | None = None,
    model: Any = None,
    pool_model: Any = None,
    pool_random: float | None = None,
    idle_only: bool = False,
    input_shape: Sequence[int] | None = None,
) -> CollectStats:
    """Measure, per task, ``budget`` of its pool chosen by ``sampler_name`` on ``profile``.

    With ``rounds`` > 1 the budget is spent in active-learning rounds: before each round
    after the first, a fresh ``model_name`` model is trained on everything measured so far
    and handed to the sampler (only to one registered with ``needs_model``). ``model`` (a trained CostModel, e.g. the model being adapted)
    guides the first round's sampler (uncertainty, embeddings). ``pool_model`` and
    ``pool_random`` shape new pools (:func:`ensure_pool`). With ``idle_only`` a batch timed
    while other processes took the CPU is thrown away and timed again once the machine is
    idle, so no record carries a loaded timing. A task this run adds to, or one already timed
    partly on this CPU, whose earlier programs another CPU model timed (as the manifest says)
    has those timed again here first, so that its labels come from one CPU (readers keep a
    task's records of the CPU that timed it last). Each run appends its provenance (commit,
    CPU, settings, load seen) to the manifest. ``input_shape`` feeds the networks given as model
    files (``path/file.py:ClassName``). All names are checked before any work starts. ``reporter``
    gets progress callbacks (see :class:`tcl.cli.collect_cmd.RichReporter`); ``None``
    reports nothing.
    """
    registry = discovery.registry()
    sampler = registry.create("samplers", sampler_name)
    round_quotas(0, rounds)  # validate before any work
    guided = rounds > 1 and registry.get("samplers", sampler_name).needs_model
    if guided:
        registry.get("cost_models", model_name)
    profile.backend_registration(registry)
    # a model file is resolved once, here (its class, module and inputs checked), and used as it is
    resolved = {name: resolve_network(name, input_shape) for name in network_names if file_network(name)}
    if input_shape is not None and not resolved:
        raise TclError(INPUT_SHAPE_NEEDS_FILE)
    for name in network_names:
        if name not in resolved and not Path(name).is_dir():
            registry.get("networks", name)
    if pool_size < 1:
        raise TclError(f"pool size must be at least 1, got {pool_size}")
    validation.budget_count(budget, pool_size)  # validate before any work
    if pool_random is not None and not 0 <= pool_random <= 1:
        raise TclError(f"pool random fraction must be in [0, 1], got {pool_random}")
    reporter = reporter or _SilentReporter()
    # the backend checks its options and its hardware (this CPU, a device, a tracker) before any
    # work; it holds no workers until it first measures
    backend = registry.create("hardware_backends", profile.backend, profile=profile)
    reporter.status("extracting tasks")
    suites = [
        network_tasks(resolved.get(n, n), profile, include_simple_tasks=include_simple_tasks, input_shape=input_shape)
        for n in network_names
    ]
    tasks, networks = merge_networks(suites)
    tasks = interleave(tasks, suites)
    if max_tasks is not None:
        tasks = tasks[:max_tasks]
    pool = ensure_pool(
        pool_dir or out_dir / POOL_SUBDIR,
        tasks,
        networks,
        profile,
        pool_size,
        seed,
        reporter.status,
        model=pool_model,
        random_fraction=pool_random,
    )

    stats = CollectStats()
    start = time.perf_counter()
    load = OtherLoad() if backend.times_on_this_host else None
    run = {
        "started": timestamp(),
        "commit": source_revision(),
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count(),
        "profile": profile.name,
        "measure": attrs.asdict(profile.measure),
        "backend_options": dict(profile.backend_options),
        "runtime_threads": profile.runtime_threads,
        "sampler": sampler_name,
        "budget": budget,
        "seed": seed,
        "networks": list(network_names),
        "idle_only": idle_only,
        "load_watched": load is not None,
    }
    try:
        with (
            deferred_interrupt() as interrupted,
            RecordWriter(out_dir, profile=profile.name, networks=networks) as writer,
        ):
            update_manifest(out_dir, tasks=tasks)

            measure = functools.partial(
                _measure_task,
                backend=backend,
                writer=writer,
                profile=profile,
                batch_size=batch_size,
                stats=stats,
                reporter=reporter,
                registry=registry,
                interrupted=interrupted,
                load=load,
                idle_only=idle_only,
            )
            done_keys = writer.measured_keys()
            plan = []
            for task in tasks:
                traces = pool.traces[task.key]
                index = pool.index(task.key)
                measured = sorted(index[k] for k in done_keys.get(task.key, ()) if k in index)
                targets = list(itertools.accumulate(round_quotas(validation.budget_count(budget, len(traces)), rounds)))
                stats.skipped_done += len(measured)
                plan.append((task, traces, measured, targets))
            # a task this run adds to, or one already timed partly here, is first timed here in full
            elsewhere = _timed_elsewhere(out_dir, profile.name) if backend.times_on_this_host else {}
            again = {}
            for task, _, measured, targets in plan:
                stale, partly_here = elsewhere.get(task.key, (set(), False))
                if stale and (targets[-1] > len(measured) or partly_here):
                    keys = pool.keys(task.key)
                    again[task.key] = [i for i in measured if keys[i] in stale]
            reporter.start(
                total=sum(max(0, p[3][-1] - len(p[2])) + len(again.get(p[0].key, ())) for p in plan), tasks=len(plan)
            )
            for position, (task, traces, _, _) in enumerate(plan, 1):
                if again.get(task.key):
                    reporter.task(position, len(plan), f"{task.name} (timed again: another CPU timed it before)")
                    measure(task, [traces[i] for i in again[task.key]])
                    stats.other_cpu += len(again[task.key])
            for r in range(rounds):
                todo = [max(0, targets[r] - len(measured)) for _, _, measured, targets in plan]
                if not any(todo):  # a finished round (on resume) needs no model either
                    continue
                if r and guided:
                    reporter.status(f"round {r + 1}/{rounds}: training {model_name} on the records so far")
                    done = load_records(out_dir, profile=profile.name).measured()
                    done = done.subset([t.key for t, *_ in plan if t.key in done.tasks])
                    model = train_round_model(done, model_name, model_options, seed) or model
                for position, ((task, traces, measured, _), n) in enumerate(zip(plan, todo), 1):
                    if n == 0:
                        continue
                    reporter.task(position, len(plan), task.name)
                    programs = pool.programs(task.key)
                    chosen = checked_selection(
                        sampler_name,
                        sampler.select(task, programs, n, measured=measured, model=model, seed=seed + r),
                        pool_size=len(traces),
                        budget=n,
                        measured=measured,
                    )
                    registry.hook.tcl_on_samples_selected(
                        sampler=sampler_name, task=task.key, indices=list(chosen), pool_size=len(traces)
                    )
                    measure(task, [traces[i] for i in chosen])
                    measured.extend(chosen)
    finally:
        backend.close()
        stats.seconds = time.perf_counter() - start
        reporter.finish()
        if stats.measured:
            add_run(out_dir, {**run, **_run_figures(stats)})
    return stats


def _run_figures(stats: CollectStats) -> dict[str, Any]:
    return {
        "seconds": round(stats.seconds, 1),
        "measured": stats.measured,
        "failed": stats.failed,
        "busy_measured": stats.busy_measured,
        "busy_cores_max": round(stats.busy_cores, 2),
        "retimed": stats.retimed,
        "other_cpu_retimed": stats.other_cpu,
    }


def _timed_elsewhere(out_dir: Path, profile: str) -> dict[str, tuple[set[str], bool]]:
    """Per task of ``out_dir`` that another CPU model timed: the keys of its programs no record
    of this CPU times, and whether this CPU timed any of its programs. Empty when the manifest
    cannot tell which CPU timed each record."""
    manifest = read_manifest(out_dir) or {}
    here = cpu_model()
    if stored_file(out_dir / WORKLOAD_FILE) is None or all(
        r.get("cpu_model") == here for r in manifest.get("runs", [])
    ):
        return {}  # nothing to read: every record was timed here
    records = load_records(out_dir, profile=profile, one_cpu_per_task=False)
    cpus = cpus_of_records(records, {out_dir: manifest})
    if cpus is None:
        return {}
    out = {}
    for task, programs in records:
        ours, elsewhere = timed_on(programs, cpus[task.key], here)
        if elsewhere:
            out[task.key] = (elsewhere, bool(ours))
    return out


def _replay(mod: Any, trace: Any) -> Any:
    """The candidate's schedule, or a build error record when TVM cannot replay its trace on
    the workload (a pool from another TVM version or another workload): one bad candidate
    never stops a collection."""
    try:
        return trace_to_schedule(mod, trace)
    except Exception as exc:  # noqa: BLE001 - TVM raises builtin error types (RuntimeError, ValueError, ...)
        return MeasureResult(run_secs=None, error_kind="build", error_msg=f"trace replay failed: {one_line(exc)}")


def _measure_task(
    task: Task,
    traces: Sequence[Any],
    backend: Any,
    writer: Any,
    profile: HardwareProfile,
    batch_size: int,
    stats: CollectStats,
    reporter: Any,
    registry: Any,
    interrupted: threading.Event,
    load: OtherLoad | None,
    idle_only: bool = False,
) -> None:
    mod = task.module()
    target = backend.target()
    take_turns = idle_only and load is not None
    for lo in range(0, len(traces), batch_size):
        batch = traces[lo : lo + batch_size]
        replayed = [_replay(mod, t) for t in batch]
        timed = [i for i, r in enumerate(replayed) if not isinstance(r, MeasureResult)]
        again = False
        while True:
            # Idle-only collections on one machine take turns: the one waiting for its turn is idle,
            # so neither sees the other as load; the wait for quiet happens inside the turn.
            with timing_turn(interrupted) if take_turns else contextlib.nullcontext():
                if again:
                    _wait_until_idle(load, interrupted)
                if take_turns:
                    load.restart()  # judge the batch, not the wait for the turn
                measured = backend.measure(mod, [replayed[i] for i in timed]) if timed else []
                results = list(replayed)
                for i, result in zip(timed, measured):
                    results[i] = result
                if interrupted.is_set():  # workers may have been killed by the same Ctrl-C: drop the batch
                    raise KeyboardInterrupt
                cores = None if load is None else load.judge() if idle_only else load.sample()
            if not (idle_only and cores is not None and cores >= BUSY_CORES):
                break
            again = True
            stats.retimed += len(batch)
            stats.busy_cores = max(stats.busy_cores, cores)
            reporter.status(
                f"other processes took {cores:.1f} cores: waiting for an idle machine to time this batch again"
            )
        writer.add(task, list(zip(batch, results)), target=target)
        registry.hook.tcl_on_records_measured(profile=profile.name, task=task.key, records=results)
        failed = sum(not r.ok for r in results)
        if load is not None:
            _note_load(cores, len(results), stats, reporter)
        stats.measured += len(results)
        stats.failed += failed
        reporter.advance(len(results), failed)


def _wait_until_idle(load: OtherLoad, interrupted: threading.Event, poll_s: float = IDLE_POLL_S) -> None:
    """Return once other processes have used less than ``BUSY_CORES`` over two polls in a row
    (one quiet moment between two compile jobs is not an idle machine)."""
    quiet = 0
    load.restart()
    while quiet < 2:
        if interrupted.wait(poll_s):
            raise KeyboardInterrupt
        cores = load.sample()
        quiet = quiet + 1 if cores is not None and cores < BUSY_CORES else 0


def _note_load(cores: float | None, programs: int, stats: CollectStats, reporter: Any) -> None:
    """Count programs timed while other processes took the CPU; warn the first time."""
    if cores is None or cores < BUSY_CORES:
        return
    if not stats.busy_measured:
        reporter.status(
            f"warning: other processes are using {cores:.1f} cores while programs are timed; "
            "these timings can be several times too slow and out of order (docs/measurement.md, Noise)"
        )
    stats.busy_measured += programs
    stats.busy_cores = max(stats.busy_cores, cores)


class _SilentReporter:
    def status(self, text: str) -> None: ...
    def start(self, total: int, tasks: int) -> None: ...
    def task(self, position: int, count: int, name: str) -> None: ...
    def advance(self, n: int, failed: int) -> None: ...
    def finish(self) -> None: ...
