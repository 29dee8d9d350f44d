"""The ``per-store`` featurizer: TVM MetaSchedule's ``PerStoreFeature``, one 164-float vector per
buffer store of a scheduled program.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from tcl.api.errors import TclError, one_line
from tcl.api.interfaces import Featurizer
from tcl.api.programs import Program, Task

PER_STORE_WIDTH = 164


class PerStoreFeaturizer(Featurizer):
    """TVM's ``PerStoreFeature`` (module doc). Options: ``target`` (dict or Target; only
    whether its keys include ``gpu`` matters), ``batch`` (candidates per TVM call),
    ``num_threads`` (TVM's extraction threads; default: the physical cores, as MetaSchedule's
    tuning uses for the XGB model's extraction, so both extract at the same speed in a search)."""

    name = "per-store"
    version = "1"
    width = PER_STORE_WIDTH

    def __init__(self, target: Any = None, batch: int = 64, num_threads: int | None = None) -> None:
        self._target_spec = target if target is not None else {"kind": "llvm"}
        self.batch = max(1, int(batch))
        self.num_threads = None if num_threads is None else max(1, int(num_threads))
        self._target = None
        self._extractor = None
        self._contexts: dict[str, tuple[Any, Any, list[Any]]] = {}  # task key -> (mod, ctx, args_info)

    def _tvm_target(self) -> Any:
        if self._target is None:
            import tvm

            spec = self._target_spec
            if isinstance(spec, tvm.target.Target):
                self._target = spec
            elif isinstance(spec, Mapping):
                self._target = tvm.target.Target(dict(spec))
            else:
                raise TclError(f"per-store: target must be a dict like {{'kind': 'llvm'}}, got {spec!r}")
        return self._target

    @property
    def is_gpu(self) -> bool:
        if isinstance(self._target_spec, Mapping) and "keys" not in self._target_spec:
            return self._target_spec.get("kind") in ("cuda", "rocm", "vulkan", "metal", "opencl", "webgpu")
        return "gpu" in [str(k) for k in self._tvm_target().keys]

    @property
    def cache_token(self) -> str:
        return "gpu" if self.is_gpu else "cpu"

    def _context(self, task: Task) -> tuple[Any, Any, list[Any]]:
        ctx = self._contexts.get(task.key)
        if ctx is None:
            import tvm.s_tir.meta_schedule as ms

            from tcl.measurement.candidates import ensure_tensor_intrinsics
            from tcl.records.pools import as_ir_module

            target = self._tvm_target()
            mod = as_ir_module(task.module())
            ensure_tensor_intrinsics(target)
            tc = ms.TuneContext(mod=mod, target=target, task_name=task.name, num_threads=self.num_threads or "physical")
            args = list(ms.arg_info.ArgInfo.from_prim_func(mod["main"]))
            ctx = (mod, tc, args)
            if len(self._contexts) >= 64:
                self._contexts.pop(next(iter(self._contexts)))
            self._contexts[task.key] = ctx
        return ctx

    def featurize(self, task: Task, programs: Sequence[Program]) -> list[np.ndarray]:
        if not programs:
            return []
        import tvm.s_tir.meta_schedule as ms

        if self._extractor is None:
            self._extractor = ms.feature_extractor.PerStoreFeature()
        if any(p.source == "tenset" for p in programs) or (
            task.mod_b64 is None and any(p.schedule is None for p in programs)
        ):
            raise TclError(f"per-store: task {task.name} has no TVM workload (TenSet import?); use trace-seq")
        mod, tc, args = self._context(task)
        from tcl.records.pools import trace_to_schedule

        out: list[np.ndarray] = []
        for start in range(0, len(programs), self.batch):
            cands = []
            for prog in programs[start : start + self.batch]:
                sch = prog.schedule
                if sch is None:
                    try:
                        sch = trace_to_schedule(mod, prog.trace)
                    except Exception as exc:  # tvm raises builtin error types (RuntimeError, ValueError, ...)
                        where = f"{prog.location}: " if prog.location else ""
                        raise TclError(
                            f"{where}per-store: cannot replay a trace of task {task.name}: {one_line(exc)}"
                        ) from None
                cands.append(ms.MeasureCandidate(sch, args))
            for arr in self._extractor.extract_from(tc, cands):
                out.append(np.ascontiguousarray(arr.numpy(), dtype=np.float32))
        return out
