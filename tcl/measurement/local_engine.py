"""Measuring batches of candidates on this host's CPU: build on every core, then time alone.

With MetaSchedule's builder and runner each candidate pays for lowering and LLVM code
generation, exporting and linking its own shared library, and timing, plus a process hop and
an argument allocation (docs/measurement.md has the measured split). Timing needs the machine to itself (a second process
makes a multi-threaded kernel wait for a descheduled worker), building does not. So a batch
is measured in two phases that never overlap:

1. **build**: the candidates are split into groups, each group compiled as one module (one
   function per candidate, one shared library) by ``build_workers`` processes at once, one
   per core. A group that fails to build is built again one candidate at a time, so one bad
   candidate costs only itself.
2. **time**: one timing process loads each library once, allocates the workload's arguments
   once per workload and times every function with TVM's ``time_evaluator`` and the profile's
   settings, one job per candidate, so a candidate that crashes or hangs becomes an error
   record (the process is replaced) and never stops the batch.

Programs and timing settings are the same as with MetaSchedule's ``LocalRunner``; the
label-repeatability benchmark (benchmarks/bench_label_repeatability.py) checks that the
labels agree as well.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from typing import Any, Sequence

import attrs

from tcl.api.measure import _as_module, _short, classify_error, configure_worker, device_type_of, worker_initializer
from tcl.api.programs import MeasureResult

# ---- code that runs in the worker processes (pickled by reference: keep imports light) -------

_LOADED: dict[str, Any] = {}  # timing worker: library path -> loaded runtime module (one kept)
_ARGS: dict[str, Any] = {}  # timing worker: args-info JSON -> allocated arguments (one kept)


def _function_name(index: int) -> str:
    return f"tcl_candidate_{index}"


def build_group(mods: Sequence[Any], target: Any) -> str:
    """Compile ``mods`` (one-function workload modules) into one shared library whose function
    ``tcl_candidate_<i>`` is candidate ``i``; returns the library's path."""
    import tvm
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    functions = {}
    for i, mod in enumerate(mods):
        mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
        (func,) = mod.functions.values()
        functions[_function_name(i)] = func.with_attr("global_symbol", _function_name(i))
    library = tvm.tirx.build(tvm.IRModule(functions), target=target)
    folder = tempfile.mkdtemp(prefix="tcl-build-")
    path = os.path.join(folder, "candidates.so")
    library.export_library(path)
    return path


@attrs.frozen(kw_only=True)
class TimingJob:
    """One candidate to time in the timing worker: which function of which library, and how."""

    path: str
    name: str
    device_type: str
    args_info: Any  # the workload's arguments as MetaSchedule's ArgInfo JSON
    number: int
    repeat: int
    min_repeat_ms: int
    cache_flush: bool
    single_run_ms: float = 0.0


def time_function(job: TimingJob) -> list[float]:
    """Seconds of each repeat of function ``job.name`` of library ``job.path``, TVM's
    time_evaluator with random inputs (allocated once per workload in this process). With
    ``single_run_ms`` > 0 one run after a warm-up comes first, and a run that long is the only
    one timed: a slow kernel's runs agree closely and each costs as much as timing a fast kernel
    in full."""
    import json

    import tvm
    from tvm.s_tir.meta_schedule.runner.local_runner import default_alloc_argument

    module = _LOADED.get(job.path)
    if module is None:
        _LOADED.clear()
        module = _LOADED[job.path] = tvm.runtime.load_module(job.path)
    device = tvm.runtime.device(job.device_type, 0)
    key = json.dumps(job.args_info)
    arguments = _ARGS.get(key)
    if arguments is None:
        _ARGS.clear()
        arguments = _ARGS[key] = default_alloc_argument(device, job.args_info, 1)[0]
    preproc = "cache_flush_cpu_non_first_arg" if job.cache_flush else ""
    device.sync()
    if job.single_run_ms > 0:
        probe = module.time_evaluator(func_name=job.name, dev=device, number=1, repeat=1, f_preproc=preproc)
        first = float(probe(*arguments).results[0])
        if first * 1e3 >= job.single_run_ms:
            return [first]
    evaluator = module.time_evaluator(
        func_name=job.name,
        dev=device,
        number=job.number,
        repeat=job.repeat,
        min_repeat_ms=job.min_repeat_ms,
        f_preproc=preproc,
    )
    return [float(x) for x in evaluator(*arguments).results]


# ---- the engine ---------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class EngineSettings:
    """How :class:`LocalEngine` builds and times (the profile's measure settings plus workers)."""

    build_workers: int = 2
    group_size: int = 4
    build_timeout_s: float = 30.0
    run_timeout_s: float = 10.0
    number: int = 1
    repeat: int = 3
    min_repeat_ms: int = 20
    enable_cpu_cache_flush: bool = False
    runtime_threads: int | None = None
    retime_spread: float = 0.0  # > 0: time a candidate once more when (max - min) / min of its repeats exceeds this
    # > 0: after a candidate that ran this long (a slow task), the next candidate of the same
    # workload has its first run come first, and when it lasts this long too it is that
    # candidate's only timed run; candidates after a faster one are timed as without it
    single_run_ms: float = 0.0


class LocalEngine:
    """Builds candidates on all cores, then times them one by one in a single timing process.

    Worker processes live across batches; :meth:`close` stops them.
    """

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        self.seconds = {"build": 0.0, "time": 0.0}  # wall time spent in each phase, all batches
        self._builders: Any = None
        self._timer: Any = None
        # workloads (structural hash) whose last timed candidate ran single_run_ms or longer, or
        # failed: their next candidate gets the one-run probe, in whichever batch it comes
        self._slow_workloads: set[int] = set()

    # -- worker pools --------------------------------------------------------------------------

    def _build_pool(self) -> Any:
        from tvm.support.popen_pool import PopenPoolExecutor

        if self._builders is None:
            self._builders = PopenPoolExecutor(
                max_workers=self.settings.build_workers,
                timeout=self.settings.build_timeout_s * self.settings.group_size,
                initializer=worker_initializer(None),
                maximum_process_uses=64,  # long-lived LLVM workers grow: recycle now and then
            )
        return self._builders

    def _time_pool(self) -> Any:
        from tvm.support.popen_pool import PopenPoolExecutor

        if self._timer is None:
            self._timer = PopenPoolExecutor(
                max_workers=1,
                timeout=self.settings.run_timeout_s,
                initializer=worker_initializer(self.settings.runtime_threads),
            )
        return self._timer

    def warm_up(self) -> None:
        """Start every worker now (each imports tvm, seconds) without waiting for them."""
        for _ in range(self.settings.build_workers):
            self._build_pool().submit(os.getpid)
        self._time_pool().submit(configure_worker, self.settings.runtime_threads)

    def close(self) -> None:
        for pool in (self._builders, self._timer):
            if pool is not None:
                pool.shutdown()
        self._builders = self._timer = None

    # -- measuring ------------------------------------------------------------------------------

    def measure(self, target: Any, mod: Any, schedules: Sequence[Any]) -> list[MeasureResult]:
        """Build and time ``schedules`` of workload ``mod``, in order; never raises for a
        bad candidate (errors are ``build``, ``run`` or ``timeout`` results)."""
        import tvm
        import tvm_ffi
        from tvm.s_tir import meta_schedule as ms

        if isinstance(target, (dict, str)):
            target = tvm.target.Target(target)
        results: list[MeasureResult | None] = [None] * len(schedules)
        modules: dict[int, Any] = {}
        for i, sch in enumerate(schedules):
            try:
                modules[i] = _as_module(sch)
            except Exception as exc:  # noqa: BLE001 - a bad candidate is an error record
                results[i] = _error("build", f"{type(exc).__name__}: {exc}")
        try:
            args_info = [a.as_json() for a in ms.arg_info.ArgInfo.from_entry_func(_as_module(mod), True)]
        except Exception as exc:  # noqa: BLE001 - without a signature nothing can be timed
            return [r or _error("run", f"workload arguments: {type(exc).__name__}: {exc}") for r in results]

        start = time.perf_counter()
        libraries = self._build(target, modules, results)
        built = time.perf_counter()
        self.seconds["build"] += built - start
        try:
            workload = int(tvm_ffi.structural_hash(mod))
            self._time(workload, device_type_of(target), args_info, libraries, results)
            self.seconds["time"] += time.perf_counter() - built
        finally:
            for path in {path for path, _ in libraries.values()}:
                shutil.rmtree(os.path.dirname(path), ignore_errors=True)
        return [r or _error("run", "not measured") for r in results]

    def _build(
        self, target: Any, modules: dict[int, Any], results: list[MeasureResult | None]
    ) -> dict[int, tuple[str, str]]:
        """candidate index -> (library path, function name) of every candidate that built."""
        pool = self._build_pool()
        indices = list(modules)
        size = self.settings.group_size
        groups = [indices[lo : lo + size] for lo in range(0, len(indices), size)]
        built: dict[int, tuple[str, str]] = {}
        retry: list[int] = []
        futures = [(group, pool.submit(build_group, [modules[i] for i in group], target)) for group in groups]
        for group, future in futures:
            path, error = _outcome(future)
            if path is not None:
                built.update({i: (path, _function_name(k)) for k, i in enumerate(group)})
            elif len(group) == 1:
                results[group[0]] = _error("build", error)
            else:
                retry.extend(group)
        singles = [(i, pool.submit(build_group, [modules[i]], target)) for i in retry]
        for i, future in singles:
            path, error = _outcome(future)
            if path is not None:
                built[i] = (path, _function_name(0))
            else:
                results[i] = _error("build", error)
        return built

    def _time(
        self,
        workload: int,
        device_type: str,
        args_info: Any,
        libraries: dict[int, tuple[str, str]],
        results: list[MeasureResult | None],
    ) -> None:
        s = self.settings
        pool = self._time_pool()
        for i in sorted(libraries):
            path, name = libraries[i]
            job = TimingJob(
                path=path,
                name=name,
                device_type=device_type,
                args_info=args_info,
                number=s.number,
                repeat=s.repeat,
                min_repeat_ms=s.min_repeat_ms,
                cache_flush=s.enable_cpu_cache_flush,
                single_run_ms=s.single_run_ms if workload in self._slow_workloads else 0.0,
            )
            secs, error = _outcome(pool.submit(time_function, job))
            if secs and s.retime_spread > 0 and max(secs) > (1 + s.retime_spread) * min(secs):
                # repeats that disagree were disturbed: the fastest of a second try is closer to
                # the undisturbed time
                again, _ = _outcome(pool.submit(time_function, job))
                secs = list(secs) + list(again or [])
            if secs:
                results[i] = MeasureResult(run_secs=tuple(secs))
            else:
                results[i] = _error("run", error or "no times")
            if s.single_run_ms > 0 and (not secs or min(secs) * 1e3 >= s.single_run_ms):
                self._slow_workloads.add(workload)
            else:
                self._slow_workloads.discard(workload)


def _outcome(future: Any) -> tuple[Any, str | None]:
    """(value, None) of a finished job, or (None, TVM's message) for an error or timeout."""
    try:
        return future.result(), None
    except Exception as exc:  # noqa: BLE001 - TimeoutError, ChildProcessError, the job's own error
        text = str(exc) or type(exc).__name__
        if isinstance(exc, TimeoutError):
            text = f"Timeout, killed after the time limit ({text})"
        return None, text


def _error(stage: str, message: str | None) -> MeasureResult:
    return MeasureResult(run_secs=None, error_kind=classify_error(stage, message), error_msg=_short(message))
