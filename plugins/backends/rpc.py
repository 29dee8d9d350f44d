"""The ``rpc`` backend: a device behind a TVM RPC tracker."""

from __future__ import annotations

import functools
import socket
from typing import Any

from tcl.api.errors import TclError
from tcl_plugins.backends.builtin import BuiltinBackend, _kind_name


class RPCBackend(BuiltinBackend):
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
