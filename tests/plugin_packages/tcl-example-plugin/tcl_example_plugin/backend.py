"""A hardware backend: builds and times candidates for a hardware profile."""

from __future__ import annotations

from typing import Any

from tcl.api.interfaces import HardwareBackend


class PlainLocalBackend(HardwareBackend):
    """Builds with TCL's fast local builder and times with TVM's stock LocalRunner, honouring
    the profile's timing settings. The default ``measure()`` asks for the builder and runner
    once and keeps them (and their worker processes); ``close()`` stops them."""

    name = "plain-local"

    def builder(self) -> Any:
        from tcl.api.measure import FastLocalBuilder

        return FastLocalBuilder(timeout_sec=self.profile.measure.build_timeout_s)

    def runner(self) -> Any:
        from tvm.s_tir import meta_schedule as ms

        m = self.profile.measure
        config = ms.runner.EvaluatorConfig(
            number=m.number,
            repeat=m.repeat,
            min_repeat_ms=m.min_repeat_ms,
            enable_cpu_cache_flush=m.enable_cpu_cache_flush,
        )
        return ms.runner.LocalRunner(timeout_sec=m.run_timeout_s, evaluator_config=config)
