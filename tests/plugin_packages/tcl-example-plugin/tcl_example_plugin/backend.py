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
        from tcl.api.measure import FastLocalBuilder, worker_initializer

        # worker processes run the profile's thread count (TVM's default is every core)
        init = worker_initializer(self.profile.runtime_threads)
        return FastLocalBuilder(timeout_sec=self.profile.measure.build_timeout_s, initializer=init)

    def runner(self) -> Any:
        from tvm.s_tir import meta_schedule as ms

        from tcl.api.measure import evaluator_config, worker_initializer

        m = self.profile.measure
        return ms.runner.LocalRunner(
            timeout_sec=m.run_timeout_s,
            evaluator_config=evaluator_config(m),
            initializer=worker_initializer(self.profile.runtime_threads),
        )
