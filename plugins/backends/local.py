"""The ``local`` backend: this host's CPU, measured through the local measuring engine."""

from __future__ import annotations

import os
from typing import Any

from tcl.api.errors import TclError
from tcl_plugins.backends.builtin import BuiltinBackend


class LocalBackend(BuiltinBackend):
    """Builds and times on this host's CPU: one runner worker with the profile's thread count
    and a single OpenBLAS thread."""

    name = "local"
    target_kinds = ("llvm", "c")
    options = frozenset({"group_size", "retime_spread", "single_run_ms"})

    def __init__(self, profile: Any) -> None:
        super().__init__(profile)
        self._engine: Any = None
        self._settings = self._engine_settings()  # bad option values fail here, not at the first batch
        self._check_this_cpu_runs_the_target()

    def _check_this_cpu_runs_the_target(self) -> None:
        from tcl.measurement.host_cpu import missing_extensions
        from tcl.records.manifest import cpu_model

        target = self.target()
        missing = missing_extensions(target)
        if missing:
            cpu = target.attrs.get("mcpu") or "the target"
            raise TclError(
                f"profile '{self.profile.name}': backend local: this CPU ({cpu_model()}) lacks "
                f"{', '.join(missing)}, which code for {cpu} uses; every program would die with an "
                "illegal instruction. Use a profile this CPU runs (`native` follows it) or measure on "
                "such a CPU (the rpc backend reaches other machines)"
            )

    def _engine_settings(self) -> Any:
        from tcl.measurement.local_engine import EngineSettings

        m = self.profile.measure
        return EngineSettings(
            build_workers=self._positive_int("build_workers", max(1, os.cpu_count() or 1)),
            group_size=self._positive_int("group_size", 4),
            build_timeout_s=float(m.build_timeout_s),
            run_timeout_s=float(m.run_timeout_s),
            number=m.number,
            repeat=m.repeat,
            min_repeat_ms=m.min_repeat_ms,
            enable_cpu_cache_flush=m.enable_cpu_cache_flush,
            runtime_threads=self.profile.runtime_threads,
            retime_spread=self._number("retime_spread", 0.0, 0, 100),
            single_run_ms=self._number("single_run_ms", 0.0, 0),
        )

    def measure(self, mod: Any, schedules: Any) -> Any:
        """Collection's path: :class:`tcl.measurement.local_engine.LocalEngine` (build on every core, then
        time alone). MetaSchedule's own tuning keeps using :meth:`builder` and :meth:`runner`."""
        if self._engine is None:
            from tcl.measurement.local_engine import LocalEngine

            self._engine = LocalEngine(self._settings)
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
