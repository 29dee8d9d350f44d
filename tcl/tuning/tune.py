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
reports time-to-reach the first method's best and latencies at equal trials.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import attrs
import numpy as np

from tcl.api import discovery
from tcl.api.errors import TclError
from tcl.api.interfaces import NetworkDefinition
from tcl.api.measure import measure_with
from tcl.learning.evaluation import load_checkpoint
from tcl.learning.training import torch_threads
from tcl.measurement.candidates import ensure_tensor_intrinsics
from tcl.measurement.default_schedule import apply_defaults, is_scheduled
from tcl.measurement.machine_load import BUSY_CORES, OtherLoad
from tcl.measurement.tasks import extract_tasks, import_network, prepare_for_tuning
from tcl.records.database import (
    RECORD_FILE,
    WORKLOAD_FILE,
    find_databases,
    load_records,
    repair_tail,
    update_manifest,
    write_atomic,
)
from tcl.records.pools import make_task
from tcl.records.tvm_log import quiet_tvm_warnings
from tcl.tuning.bridge import BridgeCostModel, TimedCostModel
from tcl.tuning.pretrained import pretrained_dir

TVM_MODELS = ("xgb", "random")
CURVE_FILE = "tune_curve.json"
RESULT_FILE = "tune_result.json"
PLOT_FILE = "tune_curve.png"
CHOICE_POPULATION = 64


# ---- what to tune and with what ------------------------------------------------------------


def file_network(spec: str) -> tuple[Path, str] | None:
    """``(path, ClassName)`` when ``spec`` names a user's network file (``path/file.py:ClassName``),
    None for a registered network's name."""
    path_text, _, cls_name = spec.rpartition(":")
    return (Path(path_text), cls_name) if path_text.endswith(".py") else None


def resolve_network(spec: str, input_shape: Sequence[int] | None = None, seed: int = 0) -> tuple[str, Any]:
    """``(name, NetworkDefinition)`` of a registered network or of ``path/file.py:ClassName``
    (built without arguments, fed ``torch.randn(input_shape)``)."""
    in_file = file_network(spec)
    if in_file is None:
        if input_shape is not None:
            raise TclError("--input-shape applies only to a network given as path/file.py:ClassName")

        return spec, discovery.registry().get("networks", spec).factory(seed=seed)
    import torch

    path, cls_name = in_file
    if not cls_name.isidentifier():
        raise TclError(f"network {spec!r}: expected path/file.py:ClassName")
    if not path.is_file():
        raise TclError(f"network {spec!r}: no such file {path}")
    if not input_shape:
        raise TclError(f"network {spec!r}: a file network needs --input-shape, e.g. 1,3,32,32")
    module_spec = importlib.util.spec_from_file_location(f"tcl_user_network_{path.stem}", path)
    user = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(user)
        cls = getattr(user, cls_name)
    except AttributeError:
        raise TclError(f"network {spec!r}: {path} defines no {cls_name}") from None
    except Exception as exc:  # the user's file may raise anything
        raise TclError(f"network {spec!r}: importing {path} failed: {type(exc).__name__}: {exc}") from None
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            module = cls()
        except Exception as exc:
            raise TclError(f"network {spec!r}: {cls_name}() failed: {type(exc).__name__}: {exc}") from None
        if not isinstance(module, torch.nn.Module):
            raise TclError(f"network {spec!r}: {cls_name}() is a {type(module).__name__}, not a torch.nn.Module")
        example = torch.randn(*input_shape)
    return f"{path.stem}:{cls_name}", NetworkDefinition(module=module.eval(), example_inputs=(example,))


def parse_shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(x) for x in text.split(","))
    except ValueError:
        shape = ()
    if not shape or any(d <= 0 for d in shape):
        raise TclError(f"--input-shape {text!r}: expected positive integers separated by commas, e.g. 1,3,32,32")
    return shape


@attrs.frozen
class Method:
    """A cost model to tune with: TVM's own (``xgb``/``random``) or one of our checkpoints."""

    label: str
    tvm_name: str | None = None
    checkpoint: Path | None = None
    online: bool = False


def resolve_method(spec: str, profile: str, online: bool = False) -> Method:
    """``xgb``/``random`` (TVM's), a checkpoint directory, or a model name with a pretrained checkpoint."""
    suffix = "+online" if online else ""
    if spec in TVM_MODELS:
        return Method(label=spec, tvm_name=spec)
    path = Path(spec)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise TclError(f"cost model {spec!r}: {path} is not a checkpoint (no config.json)")
        return Method(label=path.name + suffix, checkpoint=path, online=online)

    if spec in discovery.registry().names("cost_models"):
        shipped = pretrained_dir(profile, spec)
        if shipped is not None and (shipped / "config.json").is_file():
            return Method(label=spec + suffix, checkpoint=shipped, online=online)
        raise TclError(
            f"cost model {spec!r}: no pretrained checkpoint for profile {profile} "
            f"({shipped}); train one with tcl train --model {spec} and pass its directory"
        )
    raise TclError(
        f"cost model {spec!r}: expected xgb, random, a checkpoint directory or a cost model "
        f"with a pretrained checkpoint ({', '.join(discovery.registry().names('cost_models'))})"
    )


def _ms_cost_model(method: Method, seed: int) -> Any:
    """The method as a MetaSchedule cost model, timed (``.stats``) whichever it is."""
    import tvm.s_tir.meta_schedule as ms

    if method.tvm_name is not None:
        return TimedCostModel(ms.cost_model.CostModel.create(method.tvm_name, num_tuning_cores=1))

    return TimedCostModel(
        BridgeCostModel(load_checkpoint(method.checkpoint, verbose=False, threads=1), online=method.online, seed=seed)
    )


# ---- progress and the curve ----------------------------------------------------------------


class Curve:
    """Per-task best latencies and the curve of the weighted estimate, saved after each batch."""

    def __init__(
        self,
        path: Path,
        method: str,
        tasks: Sequence[Any],
        previous: Mapping[str, Any] | None,
        best: Mapping[str, float],
        spent: int,
    ) -> None:
        self.path = path
        self.method = method
        self.keys = [t.key for t in tasks]
        self.weights = [float(t.weight) for t in tasks]
        self.names = [t.name for t in tasks]
        self.best = [best.get(k, math.inf) for k in self.keys]
        self.points: list[dict[str, Any]] = list((previous or {}).get("points", []))
        self.time_offset = float(self.points[-1]["seconds"]) if self.points else 0.0
        self.trials = spent
        self.started = time.perf_counter()
        self.rounds = len(self.points)

    def estimate(self) -> float | None:
        if not all(math.isfinite(b) for b in self.best):
            return None
        return float(sum(w * b for w, b in zip(self.weights, self.best)))

    def seconds(self) -> float:
        return self.time_offset + time.perf_counter() - self.started

    def add_batch(
        self, task_id: int, run_secs: Sequence[Sequence[float] | None], other_cores: float | None = None
    ) -> dict[str, Any]:
        for secs in run_secs:
            if secs and all(0 < s < 1e9 for s in secs):  # fastest repeat, as Program.latency
                self.best[task_id] = min(self.best[task_id], float(np.min(secs)))
        self.trials += len(run_secs)
        self.rounds += 1
        point = {
            "round": self.rounds,
            "trials": self.trials,
            "seconds": round(self.seconds(), 3),
            "task": self.names[task_id],
            "task_best_s": _finite(self.best[task_id]),
            "estimate_s": self.estimate(),
        }
        if other_cores is not None:  # measured while other processes took that many cores
            point["other_cores"] = round(other_cores, 2)
        self.points.append(point)
        self.save()
        return point

    def as_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "points": self.points,
            "tasks": [
                {"key": k, "name": n, "weight": w, "best_s": _finite(b)}
                for k, n, w, b in zip(self.keys, self.names, self.weights, self.best)
            ],
        }

    def save(self) -> None:
        write_atomic(self.path, json.dumps(self.as_dict(), indent=1) + "\n")


@contextlib.contextmanager
def _deferred_interrupt(report: Callable[[str], None]) -> Iterator[threading.Event]:
    """The first Ctrl-C only sets a flag: the batch being measured is then dropped (its
    workers may have been killed by the same signal, which would record false failures) and
    tuning stops before MetaSchedule commits it. A second Ctrl-C stops at once."""
    flag = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(*_: Any) -> None:
        if flag.is_set():
            raise KeyboardInterrupt
        flag.set()
        report("interrupted: stopping before the next batch is recorded (Ctrl-C again to stop now)")

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _progress_callback(
    curve: Curve, network: str, report: Callable[[str], None], interrupted: threading.Event, load: OtherLoad | None
) -> Any:
    """A MetaSchedule measure callback feeding :class:`Curve` and the ``tcl_on_tuning_round_end``
    hook. It runs before MetaSchedule's own callbacks, so raising here on Ctrl-C keeps the
    interrupted batch out of the database. With ``load`` each round says when other
    processes took the CPU meanwhile (its timings, and the tuning time, are then suspect)."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    hook = discovery.registry().hook

    @derived_object
    class Progress(PyMeasureCallback):
        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
            if interrupted.is_set():
                raise KeyboardInterrupt
            secs = [
                None if r.error_msg is not None or not r.run_secs else [float(s) for s in r.run_secs]
                for r in runner_results
            ]
            busy = (load.sample() if load is not None else None) or 0.0  # None: too soon to judge
            point = curve.add_batch(int(task_id), secs, busy if busy >= BUSY_CORES else None)
            failed = sum(s is None for s in secs)
            est = point["estimate_s"]
            best = point["task_best_s"]
            report(
                f"round {point['round']}: {point['trials']} trials, {point['seconds']:.0f}s, task "
                f"{point['task']} best "
                + (f"{best * 1e3:.4f} ms" if best is not None else "none")
                + f" ({failed} failed), estimate "
                + (f"{est * 1e3:.4f} ms" if est is not None else "pending (tasks not yet measured)")
                + (f"; warning: other processes used {busy:.1f} cores" if busy >= BUSY_CORES else "")
            )
            if est is not None:
                hook.tcl_on_tuning_round_end(
                    network=network, round_index=point["round"], trials=point["trials"], best_latency_s=est
                )

    return Progress()


# ---- the run -------------------------------------------------------------------------------


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


def _tune_contexts(
    tasks: Sequence[Any], target: Any, seed: int, population: int, eps_greedy: float = 0.05
) -> list[Any]:
    import tvm.s_tir.meta_schedule as ms
    from tvm.s_tir.meta_schedule.utils import fork_seed

    ensure_tensor_intrinsics(target)

    def search() -> Any:
        return ms.search_strategy.EvolutionarySearch(
            population_size=population, eps_greedy=eps_greedy, init_min_unmeasured=min(50, population)
        )

    return [
        ms.TuneContext(
            mod=t.mod,
            target=target,
            space_generator="post-order-apply",
            search_strategy=search(),
            task_name=t.name,
            rand_state=rs,
            num_threads="physical",
        ).clone()
        for t, rs in zip(tasks, fork_seed(seed, n=len(tasks)))
    ]


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

    with ms.Profiler() as profiler, _deferred_interrupt(report) as interrupted:
        load = OtherLoad() if backend.times_on_this_host else None
        callbacks = [
            _progress_callback(curve, name, report, interrupted, load),
            *ms.measure_callback.MeasureCallback.create("default"),
        ]
        try:
            with quiet_tvm_warnings():
                contexts = _tune_contexts(tasks, target, seed, population)
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
) -> dict[str, Any]:
    """Tune ``network`` for ``trials`` measured candidates in total (records already in
    ``out_dir`` count), compile, check against torch, time; return the JSON-able result
    (also written to ``out_dir/tune_result.json``). ``population`` is the evolutionary
    search's (MetaSchedule's default 512; smaller rounds are faster and search less).
    See the module doc."""

    from tcl.api.profiles import HardwareProfile, get_profile

    report = report or (lambda line: print(line, file=sys.stderr, flush=True))
    export = None if export is None else check_export_path(export)
    if trials < 0:
        raise TclError(f"--trials must be >= 0 (0: every schedule chosen by the cost model alone), got {trials}")
    prof = profile if isinstance(profile, HardwareProfile) else get_profile(profile, profiles_dir)
    method = cost_model if isinstance(cost_model, Method) else resolve_method(cost_model, prof.name, online)
    name, definition = network if isinstance(network, tuple) else resolve_network(network, input_shape, seed)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    previous = _read_json(out_dir / CURVE_FILE)
    if previous is not None and previous.get("method") != method.label:
        raise TclError(
            f"{out_dir} holds a tuning run of {previous.get('method')!r}, not {method.label!r}; use another --out"
        )

    target = prof.tvm_target()
    started = time.perf_counter()
    with quiet_tvm_warnings():
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
    backend = discovery.registry().get("hardware_backends", prof.backend).factory(prof)
    model_stats = phases = None
    cost_model = _ms_cost_model(method, seed)
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
                f" ({_model_seconds(model_stats):.0f}s of it in the cost model: {model_stats['predicted']} predictions, "
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
    check = compile_and_check(
        definition,
        target,
        out_dir,
        prof.runtime_threads,
        repeats=repeats,
        chosen=chosen,
        use_default=use_default,
        export=export,
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
        "curve": curve.as_dict(),
        "out_dir": str(out_dir),
    }
    write_atomic(out_dir / RESULT_FILE, json.dumps(result, indent=1) + "\n")
    if plot:
        plot_curves({method.label: result}, out_dir / PLOT_FILE, title=f"{name} on {prof.name}")
    return result


# ---- compiling, checking, timing ------------------------------------------------------------


def _leaves(obj: Any) -> list[np.ndarray]:
    """Output tensors of torch or of the Relax VM, flattened in order."""
    if isinstance(obj, (list, tuple)) or type(obj).__name__ == "Array":
        return [leaf for item in obj for leaf in _leaves(item)]
    return [obj.detach().numpy() if hasattr(obj, "detach") else obj.numpy()]


def choose_schedules(
    tasks: Sequence[Any], target: Any, cost_model: Any, *, seed: int = 0, population: int = 512
) -> dict[str, Any]:
    """``{task name: scheduled PrimFunc}``: for each task, the candidate MetaSchedule's
    evolutionary search ranks first by ``cost_model``'s predictions alone, none of them built
    or measured. The population is capped at :data:`CHOICE_POPULATION`: on a busy 2-core
    machine a 128-candidate search with the mlp checkpoint took 18 s per resnet-18 task."""
    import tvm.s_tir.meta_schedule as ms

    chosen = {}
    population = min(population, CHOICE_POPULATION)
    for task, ctx in zip(tasks, _tune_contexts(tasks, target, seed, population, eps_greedy=0.0)):
        try:
            ctx.pre_tuning(
                max_trials=1,
                num_trials_per_iter=1,
                design_spaces=ctx.generate_design_space(),
                database=ms.database.MemoryDatabase(),
                cost_model=cost_model,
            )
            candidates = ctx.generate_measure_candidates()
            ctx.post_tuning()
        except (RuntimeError, ValueError):  # TVM found no valid candidate for this task: it gets a default schedule
            candidates = None
        if candidates:
            chosen[task.name] = candidates[0].sch.mod["main"]
    return chosen


def pick_fastest(
    tasks: Sequence[Any], best: Sequence[float], chosen: Mapping[str, Any], target: Any, backend: Any
) -> tuple[dict[str, str], dict[str, dict[str, float | None]]]:
    """Per task, whichever runs fastest of its best tuned record (``best``, seconds), its
    default schedule and the model's unmeasured pick (``chosen``), the latter two built and
    timed once here: ``({task name: "tuned" | "default" | "model"}, {task name: seconds of each})``.
    A few random samples of a large design space (what a small budget measures, or an
    untrained XGB picks) can be slower than the default schedule."""
    import tvm

    builder, runner = backend.builder(), backend.runner()
    picks, seconds = {}, {}
    for task, tuned in zip(tasks, best):
        candidates = {"default": apply_defaults(tvm.IRModule({"main": task.mod["main"]}), target)[0]}
        if task.name in chosen:
            candidates["model"] = tvm.IRModule({"main": chosen[task.name]})
        options = {"tuned": tuned}
        for label, result in zip(
            candidates, measure_with(builder, runner, target, task.mod, list(candidates.values()))
        ):
            options[label] = min(result.run_secs) if result.ok else math.inf
        fastest = min(options, key=options.get)
        picks[task.name] = (
            fastest if math.isfinite(options[fastest]) else ("model" if task.name in chosen else "default")
        )
        seconds[task.name] = {label: _finite(value) for label, value in options.items()}
    return picks, seconds


def compile_and_check(
    definition: Any,
    target: Any,
    db_dir: Path,
    threads: int,
    *,
    repeats: int = 20,
    chosen: Mapping[str, Any] | None = None,
    use_default: set[str] | frozenset[str] = frozenset(),
    export: Path | None = None,
) -> dict[str, Any]:
    """Compile the network with the best records of ``db_dir`` (and the schedules in ``chosen``,
    by function name, for functions without a record; default schedules for the functions
    named in ``use_default`` even where a record exists), check it against torch on the
    example inputs (raises TclError when they differ) and time both (median of ``repeats``;
    TVM with the profile's threads, torch with whichever of those and one thread is faster).
    With ``export``, the compiled library is written there once its output has matched torch."""
    import torch
    import tvm
    import tvm.s_tir.meta_schedule as ms
    from tvm import relax

    start = time.perf_counter()
    with quiet_tvm_warnings():
        mod = prepare_for_tuning(import_network(definition), target)
        executable, functions = _compile_with_database(
            mod, target, ms.database.JSONDatabase(work_dir=str(db_dir)), chosen or {}, use_default
        )
    compile_s = time.perf_counter() - start
    with torch.no_grad():  # torch first: TVM's pool threads spin after a kernel
        want = _leaves(definition.module(*definition.example_inputs))
        # torch at its best here: with the profile's threads and with one (on a busy machine
        # OpenMP barriers make two threads many times slower than one)
        torch_times = {}
        for n in sorted({1, int(threads)}):
            with torch_threads(n):
                torch_times[n] = _time_torch(definition.module, definition.example_inputs, repeats)
    torch_threads_best = min(torch_times, key=torch_times.get)
    time.sleep(0.5)  # let torch's OpenMP workers go to sleep before TVM runs
    dev = tvm.cpu()
    tvm.get_global_func("runtime.config_threadpool")(1, int(threads))
    vm = relax.VirtualMachine(executable, dev)
    inputs = [tvm.runtime.tensor(x.numpy(), dev) for x in definition.example_inputs]
    got = _leaves(vm["main"](*inputs))
    if len(got) != len(want):
        raise TclError(f"compiled network returns {len(got)} outputs, torch {len(want)}")
    worst = 0.0
    for g, w in zip(got, want):
        scale = max(1.0, float(np.abs(w).max()) if w.size else 1.0)
        if g.shape != w.shape or not np.allclose(g, w, rtol=1e-3, atol=1e-4 * scale):
            err = float(np.abs(g - w).max()) if g.shape == w.shape else math.inf
            raise TclError(
                f"the tuned network's output differs from torch (shape {g.shape} vs {w.shape}, "
                f"max abs error {err:.3g}, largest |torch| {scale:.3g})"
            )
        worst = max(worst, float(np.abs(g - w).max()) / scale if w.size else 0.0)
    if export is not None:
        with quiet_tvm_warnings():
            export_library(executable, export)
    timer = vm.time_evaluator("main", dev, number=5, repeat=repeats, min_repeat_ms=0)
    latency = float(np.median(timer(*inputs).results))
    return {
        "latency_s": latency,
        "torch_latency_s": torch_times[torch_threads_best],
        "torch_threads": torch_threads_best,
        "torch_latency_by_threads_s": torch_times,
        "compile_s": compile_s,
        "tuned_functions": functions["tuned"],
        "model_chosen_functions": functions["model"],
        "default_functions": functions["default"],
        "unscheduled_functions": functions["unscheduled"],
        "exported": None if export is None else str(export),
        "max_rel_error": worst,
        "output_check": "allclose(rtol=1e-3, atol=1e-4*max|torch|)",
    }


def _compile_with_database(
    mod: Any,
    target: Any,
    database: Any,
    chosen: Mapping[str, Any],
    use_default: set[str] | frozenset[str] = frozenset(),
) -> tuple[Any, dict[str, Any]]:
    """``MetaScheduleApplyDatabase`` on the module the tasks were extracted from, the
    ``chosen`` schedules for functions it did not schedule (``model``), default
    schedules (:mod:`tcl.measurement.default_schedule`) for every function it left unscheduled, then TVM's
    lowering, via ``tvm.compile``; also which functions got a tuned schedule (``tuned``), which
    a default one (``default``: name → rule) and which none (``unscheduled``). Not
    ``ms.relax_integration.compile_relax``: it runs
    LegalizeOps/FuseOps/FuseTIR again, which on our already fused module re-fuses the
    functions (measured on bert-tiny: none of the 8 tuned matmul/norm tasks was then found
    in the database, and the network ran ~50x slower than the sum of its tuned kernels)."""
    import tvm
    from tvm import relax

    T = relax.transform
    # after applying the database: what compile_relax runs after fusion on CPU targets (TVM 0.27 has no CPU entry in
    # relax.pipeline.dataflow_lower_passes / finalize_passes)
    passes = [
        T.RewriteDataflowReshape(),
        T.ToNonDataflow(),
        T.RemovePurityChecking(),
        T.CallTIRRewrite(),
        T.StaticPlanBlockMemory(),
        T.LowerAllocTensor(),
        T.KillAfterLastUse(),
        T.LowerRuntimeBuiltin(),
        T.ComputePrimValue(),
        T.VMShapeLower(),
        T.AttachGlobalSymbol(),
    ]

    functions: dict[str, Any] = {}

    @tvm.transform.module_pass(opt_level=3)
    def pipeline(mod: Any, _ctx: Any) -> Any:
        unscheduled = {gv.name_hint: f for gv, f in mod.functions.items() if gv.name_hint in use_default}
        mod = T.MetaScheduleApplyDatabase()(mod)
        for gv in list(mod.get_global_vars()):
            if gv.name_hint in unscheduled:
                mod[gv] = unscheduled[gv.name_hint]
        functions["tuned"] = sorted(
            gv.name_hint for gv, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc) and is_scheduled(f)
        )
        functions["model"] = []
        for gv, func in list(mod.functions_items()):
            if gv.name_hint in chosen and isinstance(func, tvm.tirx.PrimFunc) and not is_scheduled(func):
                mod[gv] = _in_place_of(chosen[gv.name_hint], func)
                functions["model"].append(gv.name_hint)
        mod, functions["default"] = apply_defaults(mod, target)
        functions["unscheduled"] = sorted(
            gv.name_hint for gv, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc) and not is_scheduled(f)
        )
        return tvm.transform.Sequential(passes)(mod)

    with target, database, tvm.transform.PassContext(opt_level=3):
        return tvm.compile(mod, target=target, relax_pipeline=pipeline), functions


def export_library(executable: Any, path: Path) -> None:
    """The compiled network as a shared library that TVM's runtime loads (``tvm.runtime.load_module``
    then ``relax.VirtualMachine``), written whole or not at all."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    executable.export_library(str(tmp))
    tmp.replace(path)


def check_export_path(path: Path) -> Path:
    """Refuse, before any work, a library path TVM could not write: it needs a ``.so`` name in an existing folder."""
    path = Path(path)
    if path.suffix != ".so":
        raise TclError(f"--export {path}: the library's name must end in .so")
    if not path.parent.is_dir():
        raise TclError(f"--export {path}: no such folder {path.parent}")
    return path


def _in_place_of(scheduled: Any, func: Any) -> Any:
    """``scheduled`` (a task's PrimFunc, named ``main``) under ``func``'s attributes, marked scheduled."""
    for key, value in func.attrs.items():
        scheduled = scheduled.with_attr(key, value)
    return scheduled.with_attr("tirx.is_scheduled", True)


def _time_torch(module: Any, inputs: Sequence[Any], repeats: int, number: int = 5) -> float:
    for _ in range(3):
        module(*inputs)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            module(*inputs)
        times.append((time.perf_counter() - t0) / number)
    return float(np.median(times))


def plot_curves(results: Mapping[str, Mapping[str, Any]], path: Path, *, title: str) -> None:
    """Best estimated latency vs trials and vs seconds, one line per method (headless PNG)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for label, result in results.items():
        points = [p for p in result["curve"]["points"] if p.get("estimate_s") is not None]
        ms_values = [p["estimate_s"] * 1e3 for p in points]
        axes[0].step([p["trials"] for p in points], ms_values, where="post", label=label, marker=".")
        axes[1].step([p["seconds"] for p in points], ms_values, where="post", label=label, marker=".")
    for ax, xlabel in zip(axes, ("measured trials", "tuning time (s)")):
        ax.set_xlabel(xlabel)
        ax.set_ylabel("estimated latency (ms): sum of weight x task best")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(buffer.getvalue())
    tmp.replace(path)


# ---- comparing methods ---------------------------------------------------------------------


def _time_to_reach(points: Sequence[Mapping[str, Any]], target_s: float | None, key: str) -> float | None:
    if target_s is None:
        return None
    for p in points:
        if p.get("estimate_s") is not None and p["estimate_s"] <= target_s * (1 + 1e-9):
            return float(p[key])
    return None


def compare(
    methods: Sequence[str],
    network: str,
    profile: Any,
    trials: int,
    out_dir: str | Path,
    *,
    online: bool = False,
    seed: int = 0,
    input_shape: Sequence[int] | None = None,
    trials_per_round: int | None = None,
    population: int = 512,
    repeats: int = 20,
    profiles_dir: Sequence[str] = (),
    report: Callable[[str], None] | None = None,
    baseline: str | None = None,
) -> dict[str, Any]:
    """Tune ``network`` with each of ``methods`` in turn (each in ``out_dir/<label>``) and
    compare them with ``baseline`` (a method as given or its label; default the first):
    ``{"rows": [...], "baseline": label, ...}``. Each row's ``seconds_to_best_of`` also says
    when that method reached every method's final estimate (None: never), so one run answers
    "how much sooner than XGB" and "than Tenset-MLP" alike. Online fine-tuning applies to our
    checkpoints only."""
    from tcl.api.profiles import HardwareProfile, get_profile

    if not methods:
        raise TclError("--compare needs at least one method")
    prof = profile if isinstance(profile, HardwareProfile) else get_profile(profile, profiles_dir)
    resolved = [resolve_method(m, prof.name, online) for m in methods]
    labels = [m.label for m in resolved]
    if len(set(labels)) != len(labels):
        raise TclError(f"--compare: methods repeat ({', '.join(labels)})")
    base_label = labels[baseline_index(baseline, methods, labels)]
    net = resolve_network(network, input_shape, seed)
    out_dir = Path(out_dir)
    results = {}
    for method in resolved:
        results[method.label] = tune_network(
            net,
            prof,
            method,
            trials,
            out_dir / method.label,
            seed=seed,
            trials_per_round=trials_per_round,
            population=population,
            repeats=repeats,
            report=report,
            plot=False,
        )
    base = results[base_label]
    base_best = base["estimate_s"]
    base_time = _time_to_reach(base["curve"]["points"], base_best, "seconds")
    rows = []
    for label in labels:
        r = results[label]
        to_each = {
            other: _time_to_reach(r["curve"]["points"], results[other]["estimate_s"], "seconds") for other in labels
        }
        t = to_each[base_label]
        n = _time_to_reach(r["curve"]["points"], base_best, "trials")
        rows.append(
            {
                "method": label,
                "measured_trials": r["measured_trials"],
                "tuning_s": r["tuning_s"],
                "estimate_ms": _ms(r["estimate_s"]),
                "latency_ms": _ms(r["latency_s"]),
                "torch_ms": _ms(r["torch_latency_s"]),
                "vs_torch": r["torch_latency_s"] / r["latency_s"],
                "time_to_baseline_best_s": t,
                "trials_to_baseline_best": n,
                "search_speedup": (base_time / t) if (t and base_time) else None,
                "latency_vs_baseline": base["latency_s"] / r["latency_s"],
                "seconds_to_best_of": to_each,
                "cost_model_s": _model_seconds(r["cost_model_stats"]),
                "rounds_under_load": r["rounds_under_load"],
            }
        )
    summary = {"network": base["network"], "profile": prof.name, "trials": trials, "baseline": base_label, "rows": rows}
    write_atomic(out_dir / "compare.json", json.dumps({**summary, "results": results}, indent=1) + "\n")
    plot_curves(results, out_dir / "compare.png", title=f"{base['network']} on {prof.name}, {trials} trials")
    return summary


def baseline_index(baseline: str | None, methods: Sequence[str], labels: Sequence[str]) -> int:
    """Which of the compared methods is the baseline: ``baseline`` names one as given or by
    its label; None is the first."""
    if baseline is None:
        return 0
    for i, (method, label) in enumerate(zip(methods, labels)):
        if baseline in (method, label):
            return i
    raise TclError(f"baseline {baseline!r} is not one of the compared methods ({', '.join(labels)})")


def _model_seconds(stats: Mapping[str, Any] | None) -> float | None:
    """Seconds the cost model's predict and update took (None: nothing was tuned in this run)."""
    return None if stats is None else stats["predict_s"] + stats["update_s"]


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3
