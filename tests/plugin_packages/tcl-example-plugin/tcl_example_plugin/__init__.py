"""A third-party TCL plugin: one sampler and one hardware backend."""

from __future__ import annotations

from typing import Any, Sequence

from tcl.hookspecs import hookimpl
from tcl.interfaces import CostModel, HardwareBackend, Sampler
from tcl.programs import Program, Task
from tcl.registrations import BackendRegistration, SamplerRegistration


class EveryKthSampler(Sampler):
    """Takes every k-th unmeasured candidate: a deterministic, model-free baseline."""

    name = "every-kth"

    def __init__(self, k: int = 2) -> None:
        self.k = k

    def select(self, task: Task, pool: Sequence[Program], budget: int, *, measured: Sequence[int] = (),
               model: CostModel | None = None, seed: int = 0) -> list[int]:
        done = set(measured)
        free = [i for i in range(len(pool)) if i not in done]
        return free[:: self.k][: max(budget, 0)]


class PlainLocalBackend(HardwareBackend):
    """Builds with TCL's fast local builder and times with TVM's stock LocalRunner,
    honouring the profile's timing settings."""

    name = "plain-local"

    def builder(self) -> Any:
        from tcl.measure import FastLocalBuilder

        return FastLocalBuilder(timeout_sec=self.profile.measure.build_timeout_s)

    def runner(self) -> Any:
        from tvm.s_tir import meta_schedule as ms

        m = self.profile.measure
        config = ms.runner.EvaluatorConfig(number=m.number, repeat=m.repeat, min_repeat_ms=m.min_repeat_ms,
                                           enable_cpu_cache_flush=m.enable_cpu_cache_flush)
        return ms.runner.LocalRunner(timeout_sec=m.run_timeout_s, evaluator_config=config)


@hookimpl
def tcl_register_samplers() -> list[SamplerRegistration]:
    return [SamplerRegistration(name="every-kth", factory=EveryKthSampler,
                                description="every k-th unmeasured candidate (example plugin)")]


@hookimpl
def tcl_register_hardware_backends() -> list[BackendRegistration]:
    return [BackendRegistration(name="plain-local", factory=PlainLocalBackend,
                                description="TCL's fast builder + TVM's stock LocalRunner (example plugin)")]
