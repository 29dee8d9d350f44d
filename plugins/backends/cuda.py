"""The ``cuda`` backend: an NVIDIA GPU on this host."""

from __future__ import annotations

import os
from typing import Any

from tcl.api.errors import TclError
from tcl_plugins.backends.builtin import BuiltinBackend


class CUDABackend(BuiltinBackend):
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
