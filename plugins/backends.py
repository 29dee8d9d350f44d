"""Built-in hardware backends: ``local`` (this host's CPU), ``rpc`` (a device behind a TVM
RPC tracker) and ``cuda`` (a GPU on this host).

``local.measure()`` (what ``tcl collect``, sampling and transfer use) goes through
:class:`tcl.measurement.local_engine.LocalEngine`: candidates are compiled several to a library on one
worker per core, then timed one by one in a single timing process. MetaSchedule's own tuning
(``tcl tune``) and the other backends use :meth:`builder` and :meth:`runner`:
:class:`tcl.api.measure.FastLocalBuilder` (a persistent worker pool, no ``tvm.s_tir.tensor_intrin``
import per build) and MetaSchedule's runner. Workers are created on first use and kept across
calls; :meth:`close` stops them.

``backend_options`` a profile may set:

* every backend: ``build_workers`` (workers of the builder; default 1 for MetaSchedule's
  builder on CPU hosts, where one worker beat two on 2 cores; the ``local`` engine defaults to
  one per core; for ``cuda`` the host's physical cores, up to 8), ``builds_per_worker``.
* ``local``: ``group_size`` (candidates compiled into one library by the engine, default 4),
  ``retime_spread`` (time a candidate a second time when its repeats spread by more than this
  fraction of the fastest; 0 = never).
* ``rpc``: ``tracker_host``, ``tracker_port``, ``device_key`` (required), ``session_timeout_s``
  (default: the profile's ``run_timeout_s``), ``session_priority`` (1), ``max_sessions`` (1).
* ``cuda``: ``device_id`` (0).
"""

from __future__ import annotations

import functools
import os
import socket
from typing import Any

from tcl.api.errors import TclError
from tcl.api.hookspecs import hookimpl
from tcl.api.interfaces import HardwareBackend
from tcl.api.registrations import BackendRegistration

_COMMON_OPTIONS = {"build_workers", "builds_per_worker"}


class _BuiltinBackend(HardwareBackend):
    """Shared parts: option checking, the builder, lazily created and cached runner."""

    name = "?"
    options: frozenset[str] = frozenset()
    target_kinds: tuple[str, ...] = ()

    def __init__(self, profile: Any) -> None:
        super().__init__(profile)
        self._builder: Any = None
        self._runner: Any = None
        unknown = sorted(set(profile.backend_options) - _COMMON_OPTIONS - set(self.options))
        if unknown:
            expected = ", ".join(sorted(_COMMON_OPTIONS | set(self.options)))
            raise TclError(
                f"{profile.source}: key 'backend_options.{unknown[0]}': unknown for backend "
                f"{self.name}; expected one of {expected}"
            )
        kind = profile.target.get("kind")
        if self.target_kinds and kind not in self.target_kinds:
            raise TclError(
                f"{profile.source}: backend {self.name} needs a target of kind "
                f"{' or '.join(self.target_kinds)}, got '{kind}'"
            )

    # -- options ----------------------------------------------------------------------------

    def option(self, key: str, default: Any = None, *, kind: type | tuple[type, ...] = object) -> Any:
        value = self.profile.backend_options.get(key, default)
        if value is None or (isinstance(value, kind) and not (isinstance(value, bool) and kind is not bool)):
            return value
        raise TclError(
            f"{self.profile.source}: key 'backend_options.{key}': expected {_kind_name(kind)}, got {value!r}"
        )

    def _positive_int(self, key: str, default: int) -> int:
        value = self.option(key, default, kind=int)
        if value <= 0:
            raise TclError(
                f"{self.profile.source}: key 'backend_options.{key}': expected a positive integer, got {value!r}"
            )
        return value

    def _fraction(self, key: str, default: float) -> float:
        value = self.option(key, default, kind=(int, float))
        if not 0 <= value < 100:
            raise TclError(
                f"{self.profile.source}: key 'backend_options.{key}': expected a number in [0, 100), got {value!r}"
            )
        return float(value)

    def default_build_workers(self) -> int:
        return 1

    # -- builder / runner -------------------------------------------------------------------

    def builder(self) -> Any:
        if self._builder is None:
            from tcl.api.measure import FastLocalBuilder

            self._builder = FastLocalBuilder(
                max_workers=self._positive_int("build_workers", self.default_build_workers()),
                timeout_sec=float(self.profile.measure.build_timeout_s),
                builds_per_worker=self._positive_int("builds_per_worker", 256),
            )
            # its workers start importing tvm while the runner starts (which blocks)
            self._builder.warm_up()
        return self._builder

    def runner(self) -> Any:
        if self._runner is None:
            self._runner = self._make_runner()
        return self._runner

    def _make_runner(self) -> Any:
        raise NotImplementedError

    def measure(self, mod: Any, schedules: Any) -> Any:
        """MetaSchedule's path with this backend's own kept builder and runner (see :meth:`close`)."""
        from tcl.api.measure import measure_with

        return measure_with(self.builder(), self.runner(), self.target(), mod, schedules)

    def evaluator_config(self) -> Any:
        from tcl.api.measure import evaluator_config

        return evaluator_config(self.profile.measure)

    def close(self) -> None:
        if self._builder is not None:
            self._builder.close()
            self._builder = None
        if self._runner is not None:
            pool = getattr(self._runner, "pool", None)
            if pool is not None:
                pool.shutdown()
            self._runner = None

    def __enter__(self) -> "_BuiltinBackend":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class LocalBackend(_BuiltinBackend):
    """Builds and times on this host's CPU: one runner worker with the profile's thread count
    and a single OpenBLAS thread."""

    name = "local"
    target_kinds = ("llvm", "c")
    options = frozenset({"group_size", "retime_spread"})

    def __init__(self, profile: Any) -> None:
        super().__init__(profile)
        self._engine: Any = None

    def measure(self, mod: Any, schedules: Any) -> Any:
        """Collection's path: :class:`tcl.measurement.local_engine.LocalEngine` (build on every core, then
        time alone). MetaSchedule's own tuning keeps using :meth:`builder` and :meth:`runner`."""
        if self._engine is None:
            from tcl.measurement.local_engine import EngineSettings, LocalEngine

            m = self.profile.measure
            self._engine = LocalEngine(
                EngineSettings(
                    build_workers=self._positive_int("build_workers", max(1, os.cpu_count() or 1)),
                    group_size=self._positive_int("group_size", 4),
                    build_timeout_s=float(m.build_timeout_s),
                    run_timeout_s=float(m.run_timeout_s),
                    number=m.number,
                    repeat=m.repeat,
                    min_repeat_ms=m.min_repeat_ms,
                    enable_cpu_cache_flush=m.enable_cpu_cache_flush,
                    runtime_threads=self.profile.runtime_threads,
                    retime_spread=self._fraction("retime_spread", 0.0),
                )
            )
            self._engine.warm_up()
        return self._engine.measure(self.target(), mod, schedules)

    def phase_seconds(self) -> dict[str, float]:
        """Wall seconds :meth:`measure` spent building and timing so far (empty before the first call)."""
        return dict(self._engine.seconds) if self._engine is not None else {}

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None
        super().close()

    def _make_runner(self) -> Any:
        from tvm.s_tir.meta_schedule.runner import LocalRunner

        from tcl.api.measure import worker_initializer

        return LocalRunner(
            timeout_sec=float(self.profile.measure.run_timeout_s),
            evaluator_config=self.evaluator_config(),
            initializer=worker_initializer(self.profile.runtime_threads),
        )


class RPCBackend(_BuiltinBackend):
    """Builds here, times on the devices registered with a TVM RPC tracker under one key
    (MetaSchedule's ``RPCRunner``). Candidates go to every such device at once: one session
    per server registered when the runner starts (``max_sessions`` overrides). The remote
    TVM thread pool is set to the profile's ``runtime_threads`` at the start of each
    measurement."""

    name = "rpc"
    times_on_this_host = False
    options = frozenset(
        {"tracker_host", "tracker_port", "device_key", "session_timeout_s", "session_priority", "max_sessions"}
    )

    def __init__(self, profile: Any) -> None:
        super().__init__(profile)
        for key, kind in (("tracker_host", str), ("tracker_port", int), ("device_key", str)):
            if self.option(key, kind=kind) is None:
                raise TclError(
                    f"{profile.source}: key 'backend_options.{key}': expected {_kind_name(kind)}, got nothing"
                )

    def rpc_config(self) -> Any:
        from tvm.s_tir.meta_schedule.runner import RPCConfig

        timeout = self.option("session_timeout_s", self.profile.measure.run_timeout_s, kind=(int, float))
        return RPCConfig(
            tracker_host=self.option("tracker_host", kind=str),
            tracker_port=self.option("tracker_port", kind=int),
            tracker_key=self.option("device_key", kind=str),
            session_priority=self.option("session_priority", 1, kind=int),
            session_timeout_sec=max(1, int(round(timeout))),
        )

    def _make_runner(self) -> Any:
        from tvm.s_tir.meta_schedule.runner import RPCRunner

        from tcl.api.measure import rpc_run_evaluator, worker_initializer

        config = self.rpc_config()
        # a plain socket probe: RPCConfig.connect_tracker() leaves a thread retrying for a
        # minute behind when the tracker is down, which holds up interpreter exit
        try:
            with socket.create_connection((config.tracker_host, config.tracker_port), timeout=10):
                pass
        except OSError as exc:
            raise TclError(
                f"{self.profile.source}: cannot reach the RPC tracker at {config.tracker_host}:{config.tracker_port} "
                f"({exc.strerror or exc}); start one: python -m tvm.exec.rpc_tracker --host HOST --port PORT"
            ) from None
        return RPCRunner(
            rpc_config=config,
            evaluator_config=self.evaluator_config(),
            f_run_evaluator=functools.partial(rpc_run_evaluator, num_threads=self.profile.runtime_threads),
            max_workers=self._positive_int("max_sessions", max(1, self._servers(config))),
            initializer=worker_initializer(None),
        )

    def _servers(self, config: Any) -> int:
        """How many servers the tracker lists under the profile's key now."""
        try:
            return int(config.count_num_servers())
        except (OSError, RuntimeError, ValueError) as exc:
            raise TclError(
                f"{self.profile.source}: the RPC tracker at {config.tracker_host}:{config.tracker_port} "
                f"did not list its servers ({exc})"
            ) from None


class CUDABackend(_BuiltinBackend):
    """Builds here (nvcc/NVRTC through TVM), times on a local NVIDIA GPU."""

    name = "cuda"
    options = frozenset({"device_id"})
    target_kinds = ("cuda",)

    def __init__(self, profile: Any) -> None:
        super().__init__(profile)
        import tvm

        self.device_id = self.option("device_id", 0, kind=int)
        if not tvm.cuda(self.device_id).exist:
            built = "with" if tvm.runtime.enabled("cuda") else "without"
            raise TclError(
                f"profile '{profile.name}': backend cuda: no CUDA device {self.device_id} visible to TVM "
                f"(tvm.cuda({self.device_id}).exist is False; TVM runtime {built} CUDA); use a CPU profile "
                "or a host with an NVIDIA GPU and driver"
            )

    def default_build_workers(self) -> int:
        from tvm.s_tir.meta_schedule.utils import cpu_count

        return max(1, min(8, cpu_count(logical=False)))

    def _make_runner(self) -> Any:
        from tvm.s_tir.meta_schedule.runner import LocalRunner

        from tcl.api.measure import worker_initializer

        env = {}
        if self.device_id:  # LocalRunner always opens device 0: remap the visible devices
            visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
            env["CUDA_VISIBLE_DEVICES"] = (
                visible[self.device_id] if self.device_id < len(visible) else str(self.device_id)
            )
        return LocalRunner(
            timeout_sec=float(self.profile.measure.run_timeout_s),
            evaluator_config=self.evaluator_config()._replace(enable_cpu_cache_flush=False),
            initializer=worker_initializer(self.profile.runtime_threads, env),
        )


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false", object: "a value"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)


@hookimpl
def tcl_register_hardware_backends() -> list[BackendRegistration]:
    return [
        BackendRegistration(
            name="local",
            factory=LocalBackend,
            description="this host's CPU: persistent build worker, one timing worker with the profile's threads",
            device="cpu",
        ),
        BackendRegistration(
            name="rpc",
            factory=RPCBackend,
            description="a device behind a TVM RPC tracker (tracker_host, tracker_port, device_key)",
            device="rpc",
        ),
        BackendRegistration(
            name="cuda",
            factory=CUDABackend,
            description="an NVIDIA GPU on this host (LocalRunner on cuda:device_id)",
            device="cuda",
        ),
    ]
