"""Tune a whole network with MetaSchedule driven by one of our cost models (or TVM's own).

:func:`tune_network` extracts the network's tasks (:mod:`tcl.measurement.tasks`), runs MetaSchedule's
gradient task scheduler with evolutionary search, builds and times candidates with the
profile's backend (the fast builder of :mod:`tcl.api.measure`), then compiles the network with
the best schedules, checks its output against torch on the same input and times both.

Output directory: a TVM JSONDatabase (``database_*.json``) plus our manifest, ``tune_curve.json``
(rewritten after every measured batch, so an interrupted run leaves its curve) and
``tune_result.json`` / ``tune_curve.png`` at the end. A rerun into the same directory
continues: records already there count as spent trials, MetaSchedule's search starts from
the best of them (it reads the database), and the curve continues from its last point.

The curve's latency is the estimate TenSet and TLP tune against: the sum over tasks of
``weight x best measured latency`` (only once every task has a successful measurement).
The end-to-end latency of the compiled network is measured once, at the end.

:func:`compare` runs several methods one after another on one network and profile and
reports time-to-reach the first method's best and latencies at equal trials."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from tcl.api import defaults, discovery
from tcl.api.errors import TclError
from tcl.api.measure import set_tvm_threads
from tcl.api.profiles import HardwareProfile, get_profile
from tcl.measurement.machine_load import OtherLoad
from tcl.measurement.networks import resolve_network
from tcl.measurement.tasks import extract_tasks
from tcl.records.database import RECORD_FILE, WORKLOAD_FILE, find_databases, load_records
from tcl.records.manifest import update_manifest
from tcl.records.pools import make_task
from tcl.records.stored_files import repair_tail, write_atomic
from tcl.records.tvm_log import quiet_tvm_warnings
from tcl.tuning.compile import (
    check_export_path,
    choose_schedules,
    compile_and_check,
    pick_fastest,
    time_torch_compiled,
)
from tcl.tuning.contexts import tune_contexts
from tcl.tuning.curve import (
    CURVE_FILE,
    PLOT_FILE,
    Curve,
    deferred_interrupt,
    model_seconds,
    plot_curves,
    progress_callback,
)
from tcl.tuning.methods import Method, ms_cost_model, resolve_method

RESULT_FILE = "tune_result.json"


def _existing(out_dir: Path, tasks: Sequence[Any]) -> tuple[int, dict[str, float]]:
    """Trials already recorded in ``out_dir`` for ``tasks`` and their best latencies."""
    if not (out_dir / WORKLOAD_FILE).exists():
        return 0, {}
    for name in (WORKLOAD_FILE, RECORD_FILE):  # an interrupted TVM writer may leave a torn line
        repair_tail(out_dir / name)
    if out_dir not in find_databases(out_dir):
        return 0, {}
    records = load_records(out_dir)
    spent, best = 0, {}
    for task in tasks:
        progs = records.programs.get(task.key, [])
        spent += len(progs)
        lat = [p.latency for p in progs if p.ok]
        if lat:
            best[task.key] = min(lat)
    return spent, best


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise TclError(f"{path}: unreadable ({exc})") from None


def _run_tuning(
    out_dir: Path,
    tasks: Sequence[Any],
    target: Any,
    seed: int,
    population: int,
    per_round: int,
    remaining: int,
    backend: Any,
    cost_model: Any,
    curve: Curve,
    name: str,
    report: Callable[[str], None],
) -> tuple[dict[str, Any], dict[str, float]]:
    """MetaSchedule's gradient task scheduler over ``tasks``; Ctrl-C ends it with
    KeyboardInterrupt. Returns the cost model's calls and seconds (``TimedCostModel.stats``)
    and the seconds of each phase MetaSchedule's own profiler timed (search, build, run...),
    which say where the tuning time went besides the model."""
    import tvm.s_tir.meta_schedule as ms

    with ms.Profiler() as profiler, deferred_interrupt(report) as interrupted:
        load = OtherLoad() if backend.times_on_this_host else None
        callbacks = [
            progress_callback(curve, name, report, interrupted, load),
            *ms.measure_callback.MeasureCallback.create("default"),
        ]
        try:
            with quiet_tvm_warnings():
                contexts = tune_contexts(tasks, target, seed, population)
            ms.tune_tasks(
                tasks=contexts,
                task_weights=[float(t.weight) for t in tasks],
                work_dir=str(out_dir),
                max_trials_global=remaining,
                num_trials_per_iter=per_round,
                builder=backend.builder(),
                runner=backend.runner(),
                database=ms.database.JSONDatabase(work_dir=str(out_dir)),
                cost_model=cost_model,
                measure_callbacks=callbacks,
                task_scheduler="gradient",
            )
        except BaseException:
            if interrupted.is_set():  # whatever the signal became on its way through TVM's C++
                raise KeyboardInterrupt from None
            raise
    stats = {k: round(v, 3) if isinstance(v, float) else v for k, v in cost_model.stats.items()}
    phases = {str(k): round(float(v), 3) for k, v in sorted(profiler.get().items(), key=lambda kv: -float(kv[1]))}
    return stats, phases


def default_trials_per_round(trials: int, n_tasks: int) -> int:
    """Small rounds when the budget is small: every task gets about two rounds (4..64 trials)."""
    return max(4, min(64, trials // max(1, 2 * n_tasks)))


def coverage_warning(trials: int, per_round: int, n_tasks: int) -> str | None:
    """Why a budget gives no estimate: MetaSchedule's task scheduler visits the tasks
    round-robin first, so ``trials`` at ``per_round`` a round may never reach some of them,
    and the network's latency estimate needs a measured schedule for every task."""
    rounds = -(-trials // per_round)
    if rounds >= n_tasks:
        return None
    return (
        f"warning: {trials} trials at {per_round} per round measure at most {rounds} of {n_tasks} tasks (the "
        f"others get the schedule the cost model ranks first, unmeasured), so there will be no latency "
        f"estimate; give --trials {n_tasks * per_round} or more"
    )


def tune_network(
    network: str | tuple[str, Any],
    profile: Any,
    cost_model: str | Method,
    trials: int,
    out_dir: str | Path,
    online: bool = False,
    seed: int = 0,
    *,
    input_shape: Sequence[int] | None = None,
    trials_per_round: int | None = None,
    population: int = 512,
    repeats: int = 20,
    profiles_dir: Sequence[str] = (),
    report: Callable[[str], None] | None = None,
    plot: bool = True,
    export: str | Path | None = None,
    torch_compile: bool = False,
    race: int = defaults.RACE_RECORDS,
) -> dict[str, Any]:
    """Tune ``network`` for ``trials`` measured candidates in total (records already in
    ``out_dir`` count), compile, check against torch, time; return the JSON-able result
    (also written to ``out_dir/tune_result.json``). ``population`` is the evolutionary
    search's (MetaSchedule's default 512; smaller rounds are faster and search less).
    ``torch_compile`` also times the network under torch.compile (inductor) beside torch eager.
    ``race``: how many of each task's best records race inside the compiled network (1: none;
    :mod:`tcl.tuning.race`).
    See the module doc."""

    report = report or (lambda line: print(line, file=sys.stderr, flush=True))
    export = None if export is None else check_export_path(export)
    if race < 1:
        raise TclError(f"--race must be >= 1 (1: compile each task's best record as it is), got {race}")
    if trials < 0:
        raise TclError(f"--trials must be >= 0 (0: every schedule chosen by the cost model alone), got {trials}")
    prof = profile if isinstance(profile, HardwareProfile) else get_profile(profile, profiles_dir)
    # checks its options and its hardware (this CPU, a device) before any work; no workers yet
    backend = prof.backend_registration(discovery.registry()).factory(prof)
    method = cost_model if isinstance(cost_model, Method) else resolve_method(cost_model, prof.name, online)
    name, definition = network if isinstance(network, tuple) else resolve_network(network, input_shape, seed)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    previous = _read_json(out_dir / CURVE_FILE)
    if previous is not None and previous.get("method") != method.label:
        raise TclError(
            f"{out_dir} holds a tuning run of {previous.get('method')!r}, not {method.label!r}; use another --out"
        )

    # before anything runs a TVM kernel here (constant folding does): the pool is sized once
    set_tvm_threads(prof.runtime_threads)
    target = prof.tvm_target()
    started = time.perf_counter()
    tasks = extract_tasks(definition, target)
    if not tasks:
        raise TclError(f"network {name}: no tunable task (no operator with a reduction)")

    update_manifest(
        out_dir,
        profile=prof.name,
        networks={name: {"tasks": len(tasks)}},
        tasks=[make_task(t.mod, name=t.name, weight=t.weight, networks=(name,)) for t in tasks],
    )
    spent, best = _existing(out_dir, tasks)
    remaining = max(0, trials - spent)
    per_round = trials_per_round or default_trials_per_round(trials, len(tasks))
    curve = Curve(out_dir / CURVE_FILE, method.label, tasks, previous, best, spent)
    report(
        f"tuning {name} ({len(tasks)} tasks) on {prof.name} with {method.label}: {remaining} of {trials} "
        f"trials left ({spent} already in {out_dir}), {per_round} per round"
    )
    warning = coverage_warning(trials, per_round, len(tasks)) if trials else None
    if warning:
        report(warning)
    model_stats = phases = None
    cost_model = ms_cost_model(method, seed)
    try:
        if remaining:
            model_stats, phases = _run_tuning(
                out_dir, tasks, target, seed, population, per_round, remaining, backend, cost_model, curve, name, report
            )
        tuning_s = curve.seconds() if remaining else curve.time_offset
        curve.save()
        spent_in_model = (
            ""
            if model_stats is None
            else (
                f" ({model_seconds(model_stats):.0f}s of it in the cost model: {model_stats['predicted']} predictions, "
                f"{model_stats['updates']} updates)"
            )
        )
        report(f"tuned in {tuning_s:.0f}s{spent_in_model}")
        unmeasured = [t for t, b in zip(tasks, curve.best) if not math.isfinite(b)]
        if unmeasured:
            report(
                f"{len(unmeasured)} of {len(tasks)} tasks have no measured schedule: choosing theirs by "
                f"{method.label}'s predictions alone"
            )
        start_choice = time.perf_counter()
        with quiet_tvm_warnings():
            chosen = choose_schedules(unmeasured, target, cost_model, seed=seed, population=population)
        choose_s = time.perf_counter() - start_choice
        picks = checks = None
        if trials:
            report(
                "timing each task's default schedule and the model's unmeasured picks once, against the tuned records"
            )
            with quiet_tvm_warnings():
                picks, checks = pick_fastest(tasks, curve.best, chosen, target, backend)
            chosen = {k: v for k, v in chosen.items() if picks[k] == "model"}
        report(f"compiling {name}")
    finally:
        backend.close()
    use_default = {k for k, v in (picks or {}).items() if v == "default"}
    peers = {}
    if torch_compile:  # before TVM's runtime starts: its pool threads spin after a kernel
        report(f"timing {name} under torch.compile (inductor; compiling takes a while)")
        peers = time_torch_compiled(definition, prof.runtime_threads, repeats)
    check = compile_and_check(
        definition,
        target,
        out_dir,
        prof.runtime_threads,
        repeats=repeats,
        chosen=chosen,
        use_default=use_default,
        export=export,
        race=race,
    )
    if check["tvm_threads"] < prof.runtime_threads:
        report(
            f"TVM's thread pool has {check['tvm_threads']} threads, not the profile's {prof.runtime_threads} "
            "(it was created before tcl tune could size it): the network was timed with fewer"
        )
    result = {
        "network": name,
        "profile": prof.name,
        "method": method.label,
        "trials": trials,
        "measured_trials": curve.trials,
        "trials_per_round": per_round,
        "tasks": len(tasks),
        "tuning_s": tuning_s,
        "model_choice_s": choose_s,
        "schedule_checks_s": checks,
        "wall_s": time.perf_counter() - started,
        "estimate_s": curve.estimate(),
        "rounds_under_load": sum("other_cores" in point for point in curve.points),
        "cost_model_stats": model_stats,
        "tuning_phases_s": phases,
        **check,
        **peers,
        "curve": curve.as_dict(),
        "out_dir": str(out_dir),
    }
    write_atomic(out_dir / RESULT_FILE, json.dumps(result, indent=1) + "\n")
    if plot:
        plot_curves({method.label: result}, out_dir / PLOT_FILE, title=f"{name} on {prof.name}")
    return result
