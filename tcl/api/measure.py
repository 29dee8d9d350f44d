"""Building and timing candidate schedules with MetaSchedule's builders and runners.

Core code: it knows MetaSchedule, never a concrete backend plugin. Backends combine
:class:`FastLocalBuilder` (or any ``ms.builder.Builder``) with a runner and call
:func:`measure_with`.

Two things make measuring fast on small machines (docs/measurement.md):

* TVM's default build function imports ``tvm.s_tir.tensor_intrin`` in every worker
  (seconds to over a minute on a busy 2-core VM) although a scheduled module no longer
  needs the tensor-intrinsic registry; :func:`fast_build` does the same build without it.
* ``ms.builder.LocalBuilder`` starts a fresh process pool for every batch, so every batch
  pays the worker's ``import tvm`` again; :class:`FastLocalBuilder` keeps its pool.

Measuring workers are configured by :func:`configure_worker`: ``OPENBLAS_NUM_THREADS=1``
and the profile's TVM thread count (TVM's own default is *half* the logical CPUs, 1 thread
on a 2-vCPU VM, whatever the target's ``num-cores`` says).
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from typing import Any, Callable, Sequence

from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.builder import BuilderInput, BuilderResult, PyBuilder
from tvm.support.popen_pool import PopenPoolExecutor, StatusKind

from tcl.api.programs import MeasureResult

# What TVM's messages say when a job ran out of time: LocalBuilder/LocalRunner/RPCRunner
# "...: Timeout, killed after N seconds" (their process pool killed the worker); an RPC
# server that killed a session past its session_timeout makes the client raise
# "tvm.error.RPCSessionTimeoutError: ... session has expired".
_TIMEOUT_MARKERS = ("Timeout, killed after", "RPCSessionTimeoutError")

#: How many builds one builder worker does before it is restarted (TVM restarts its pool
#: every batch because of a memory leak in long-lived workers; we recycle less often).
DEFAULT_BUILDS_PER_WORKER = 256


# ---- code that runs in the worker processes --------------------------------------------------
# These functions are pickled by reference (cloudpickle), so workers import tcl.api.measure: keep
# this module free of plugins and of imports heavier than tvm's own.


def fast_build(mod: Any, target: Any, _params: Any = None) -> Any:
    """MetaSchedule's ``default_build`` without ``import tvm.s_tir.tensor_intrin``."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)


def set_tvm_threads(num_threads: int) -> int:
    """Give TVM's CPU thread pool ``num_threads`` threads; returns how many it has.

    TVM sizes its pool once, when it is first used, from ``TVM_NUM_THREADS`` or else from
    half the logical CPUs (it takes every second one for a hyperthread: a single thread on a
    2-vCPU VM), and ``runtime.config_threadpool`` cannot grow it past that size later. So the
    variable is set first; a pool that already exists can only shrink, and the caller sees
    the count it got."""
    import tvm

    os.environ["TVM_NUM_THREADS"] = str(num_threads)
    tvm.get_global_func("runtime.config_threadpool")(1, num_threads)
    return int(tvm.runtime.num_threads())


def configure_worker(num_threads: int | None = None, env: dict[str, str] | None = None) -> None:
    """Initializer of a measuring worker: one OpenBLAS thread, ``num_threads`` TVM threads.

    Runs right after the worker started, before it executed any TVM kernel (see
    :func:`set_tvm_threads`)."""
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    for key, value in (env or {}).items():
        os.environ[key] = str(value)
    try:  # the worker imported numpy (and its OpenBLAS) before this ran
        import threadpoolctl

        threadpoolctl.threadpool_limits(1, user_api="blas")
    except Exception:  # noqa: BLE001 - best effort, threadpoolctl is optional
        pass
    if num_threads:
        set_tvm_threads(num_threads)


def worker_initializer(num_threads: int | None = None, env: dict[str, str] | None = None) -> Callable[[], None]:
    """A picklable zero-argument initializer for ``PopenPoolExecutor``-based builders/runners."""
    return functools.partial(configure_worker, num_threads, dict(env or {}))


def rpc_run_evaluator(
    session: Any, rt_mod: Any, device: Any, evaluator_config: Any, repeated_args: Any, *, num_threads: int | None = None
) -> list[float]:
    """``RPCRunner``'s ``f_run_evaluator`` that first sets the remote TVM thread pool to
    ``num_threads`` (the profile's ``runtime_threads``); bind it with functools.partial."""
    from tvm.s_tir.meta_schedule.runner.utils import run_evaluator_common

    if num_threads:
        session.get_function("runtime.config_threadpool")(1, num_threads)
    return run_evaluator_common(rt_mod, device, evaluator_config, repeated_args)


def _build_one(f_build: Callable, mod: Any, target: Any) -> str:
    """Build and export one module in a builder worker; returns the artifact path."""
    from tvm.s_tir.meta_schedule.builder.local_builder import default_export

    return default_export(f_build(mod, target, None))


# ---- the builder ---------------------------------------------------------------------------


@derived_object
class FastLocalBuilder(PyBuilder):
    """A local builder whose worker pool lives across batches and that builds with
    :func:`fast_build` by default (a drop-in for ``ms.builder.LocalBuilder``).

    ``max_workers`` defaults to 1: on 2 cores one worker built faster than two. Workers
    are recycled after ``builds_per_worker`` builds and after a timeout. Call :meth:`close`
    (or let it be garbage collected) to stop them.
    """

    def __init__(
        self,
        *,
        max_workers: int = 1,
        timeout_sec: float = 30.0,
        f_build: Callable | None = None,
        builds_per_worker: int | None = DEFAULT_BUILDS_PER_WORKER,
        initializer: Callable[[], None] | None = None,
    ) -> None:
        super().__init__()
        self.max_workers = max_workers
        self.timeout_sec = timeout_sec
        self.f_build = f_build or fast_build
        self.builds_per_worker = builds_per_worker
        self.initializer = initializer or worker_initializer(None)
        self._pool = None

    def _get_pool(self) -> PopenPoolExecutor:
        if self._pool is None:
            self._pool = PopenPoolExecutor(
                max_workers=self.max_workers,
                timeout=self.timeout_sec,
                initializer=self.initializer,
                maximum_process_uses=self.builds_per_worker,
            )
        return self._pool

    def warm_up(self) -> None:
        """Start the workers in the background (each imports tvm: seconds), so that the
        first batch does not wait for them; returns at once."""
        pool = self._get_pool()
        for _ in range(self.max_workers):
            pool.submit(os.getpid)

    def build(self, build_inputs: list[BuilderInput]) -> list[BuilderResult]:
        pool = self._get_pool()
        results: list[BuilderResult] = []
        jobs = [(self.f_build, inp.mod, inp.target) for inp in build_inputs]
        for out in pool.map_with_error_catching(lambda job: _build_one(*job), jobs):
            if out.status == StatusKind.COMPLETE:
                results.append(BuilderResult(out.value, None))
            elif out.status == StatusKind.TIMEOUT:
                results.append(BuilderResult(None, f"LocalBuilder: Timeout, killed after {self.timeout_sec} seconds"))
            else:
                results.append(BuilderResult(None, "LocalBuilder: An exception occurred\n" + str(out.value)))
        return results

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


def evaluator_config(settings: Any) -> Any:
    """``ms.runner.EvaluatorConfig`` from a profile's :class:`~tcl.api.profiles.MeasureSettings`."""
    from tvm.s_tir.meta_schedule.runner import EvaluatorConfig

    return EvaluatorConfig(
        number=settings.number,
        repeat=settings.repeat,
        min_repeat_ms=settings.min_repeat_ms,
        enable_cpu_cache_flush=settings.enable_cpu_cache_flush,
    )


# ---- measuring -----------------------------------------------------------------------------


def _as_module(obj: Any) -> Any:
    """An IRModule from a Schedule, an IRModule or a PrimFunc."""
    import tvm

    if isinstance(obj, tvm.s_tir.Schedule):
        return obj.mod
    if isinstance(obj, tvm.tirx.PrimFunc):
        if obj.attrs is None or "global_symbol" not in obj.attrs:
            obj = obj.with_attr("global_symbol", "main")
        return tvm.IRModule({"main": obj})
    if isinstance(obj, tvm.IRModule):
        return obj
    raise TypeError(f"cannot measure a {type(obj).__name__}: expected a Schedule, IRModule or PrimFunc")


def classify_error(stage: str, message: str | None) -> str:
    """``timeout`` when TVM says the job was killed for time, else ``stage`` (build/run)."""
    text = message or ""
    if any(marker.lower() in text.lower() for marker in _TIMEOUT_MARKERS):
        return "timeout"
    return stage


def _short(message: str | None, limit: int = 2000) -> str:
    text = (message or "").strip()
    return text if len(text) <= limit else text[: limit // 2] + "\n...\n" + text[-limit // 2 :]


def _run_secs(values: Any) -> tuple[float, ...]:
    return tuple(float(getattr(v, "value", v)) for v in values)


def _remove_artifact(path: str | None) -> None:
    if not path:
        return
    folder = os.path.dirname(path)
    # default_export writes into a fresh tempfile.mkdtemp() folder; remove only those
    if folder and os.path.dirname(os.path.abspath(folder)) == os.path.abspath(tempfile.gettempdir()):
        shutil.rmtree(folder, ignore_errors=True)
    else:
        try:
            os.remove(path)
        except OSError:
            pass


def device_type_of(target: Any) -> str:
    """The runner's device name for ``target`` ("cpu" for llvm, "cuda" for cuda): runners
    call ``tvm.runtime.device(name, 0)``, which rejects target kind names like "llvm"."""
    import tvm

    return tvm.runtime.device(int(target.get_target_device_type()), 0).type


def measure_with(builder: Any, runner: Any, target: Any, mod: Any, schedules: Sequence[Any]) -> list[MeasureResult]:
    """Build with ``builder`` and time with ``runner`` each of ``schedules`` (Schedules,
    IRModules or PrimFuncs of workload ``mod``), in order.

    Never raises for a bad candidate: a failed build gives ``error_kind="build"``, a failed
    run ``"run"``, a build or run killed for exceeding its time limit ``"timeout"``.
    """
    import tvm
    from tvm.s_tir import meta_schedule as ms

    if isinstance(target, (dict, str)):
        target = tvm.target.Target(target)
    results: list[MeasureResult | None] = [None] * len(schedules)
    try:
        workload_args = list(ms.arg_info.ArgInfo.from_entry_func(_as_module(mod), True))
    except Exception:  # noqa: BLE001 - fall back to each candidate's own signature
        workload_args = None

    # 1. candidates -> builder inputs
    prepared: list[tuple[int, Any, list[Any]]] = []
    for i, sch in enumerate(schedules):
        try:
            cand_mod = _as_module(sch)
            args = (
                workload_args
                if workload_args is not None
                else list(ms.arg_info.ArgInfo.from_entry_func(cand_mod, True))
            )
            prepared.append((i, ms.builder.BuilderInput(cand_mod, target), args))
        except Exception as exc:  # noqa: BLE001
            results[i] = MeasureResult(
                run_secs=None, error_kind="build", error_msg=_short(f"{type(exc).__name__}: {exc}")
            )

    # 2. build (one call for the batch; one call per candidate if the batch call itself fails)
    built: list[tuple[int, str, list[Any]]] = []
    if prepared:
        try:
            build_results = list(builder.build([inp for _, inp, _ in prepared]))
        except Exception:  # noqa: BLE001
            build_results = []
            for _, inp, _ in prepared:
                try:
                    build_results.append(builder.build([inp])[0])
                except Exception as exc:  # noqa: BLE001
                    build_results.append(ms.builder.BuilderResult(None, f"{type(exc).__name__}: {exc}"))
        for (i, _, args), res in zip(prepared, build_results):
            if res.error_msg is not None or not res.artifact_path:
                msg = res.error_msg or "builder returned no artifact"
                results[i] = MeasureResult(
                    run_secs=None, error_kind=classify_error("build", msg), error_msg=_short(msg)
                )
            else:
                built.append((i, str(res.artifact_path), args))

    # 3. run (one call for the batch so that runners with several workers overlap; one call
    #    per candidate if the batch call itself fails)
    device_type = device_type_of(target)
    try:
        inputs = [ms.runner.RunnerInput(path, device_type, args) for _, path, args in built]
        try:
            futures: list[Any] = list(runner.run(inputs)) if inputs else []
        except Exception:  # noqa: BLE001
            futures = [None] * len(inputs)
        for (i, _, _), inp, future in zip(built, inputs, futures):
            try:
                if future is None:
                    future = runner.run([inp])[0]
                res = future.result()
                msg, secs = res.error_msg, res.run_secs
            except Exception as exc:  # noqa: BLE001
                msg, secs = f"{type(exc).__name__}: {exc}", None
            if msg is not None or not secs:
                msg = msg or "runner returned no times"
                results[i] = MeasureResult(run_secs=None, error_kind=classify_error("run", msg), error_msg=_short(msg))
            else:
                results[i] = MeasureResult(run_secs=_run_secs(secs))
    finally:
        for _, path, _ in built:
            _remove_artifact(path)
    return [
        r if r is not None else MeasureResult(run_secs=None, error_kind="run", error_msg="not measured")
        for r in results
    ]
