"""Default CPU schedules for the functions of a compiled network that got no tuned schedule.

TVM compiles a function without a schedule as plain serial loops: on CPU that made a
network whose heaviest tasks were tuned many times slower than torch. Every function left
without a tuned schedule gets, in this order:

1. TVM's own ``tvm.s_tir.dlight.cpu`` rules (``GEMV``, ``Reduction``: softmax, norms), where
   they match;
2. :class:`ParallelVectorize` otherwise: per block, the spatial loops before the first
   reduction loop fused and run in parallel, the innermost spatial loop moved inside the
   reduction loops (so a matmul runs ``i, k, j`` and a convolution ``n, c, h, rc, ry, rx, w``)
   and vectorized by the target's vector width when its extent allows.

Both only reorder, fuse, split and annotate loops, so the function computes the same thing.
:func:`apply_defaults` returns the scheduled module and which functions each rule took.
"""

from __future__ import annotations

from typing import Any

from tvm import s_tir, tirx
from tvm.s_tir.dlight import ScheduleRule, normalize_prim_func
from tvm.s_tir.dlight.cpu import GEMV, Reduction

SCHEDULED_ATTR = "tirx.is_scheduled"


def is_scheduled(func: Any) -> bool:
    return bool(func.attrs and func.attrs.get(SCHEDULED_ATTR, False))


def _lanes(target: Any) -> int:
    """float32 lanes of the target's vector registers (8 when TVM cannot tell)."""
    from tvm.target.codegen import llvm_get_vector_width

    try:
        bits = int(llvm_get_vector_width(target))
    except Exception:  # not an LLVM target TVM can query
        bits = 256
    return max(4, bits // 32)


def _const(extent: Any) -> int | None:
    return int(extent) if isinstance(extent, (int, tirx.IntImm)) else None


class ParallelVectorize(ScheduleRule):
    """Parallel outer spatial loops and a vectorized innermost spatial loop for any block nest."""

    def apply(self, func: Any, target: Any, _tunable: bool) -> s_tir.Schedule | None:
        if not isinstance(func, tirx.PrimFunc) or target.kind.name != "llvm":
            return None
        sch = s_tir.Schedule(func)
        blocks = normalize_prim_func(sch)
        if blocks is None:
            return None
        lanes = _lanes(target)
        changed = False
        for info in blocks:
            kinds = info.dom_kind()
            if not kinds or "O" in kinds:
                continue
            changed |= self._schedule_block(sch, info, kinds, lanes)
        return sch if changed else None

    @staticmethod
    def _schedule_block(sch: s_tir.Schedule, info: Any, kinds: str, lanes: int) -> bool:
        loops = [it.loop_rv for it in info.iters]
        extents = [_const(it.dom) for it in info.iters]
        first_r = kinds.find("R")
        reduction = first_r >= 0
        if reduction and "S" in kinds[first_r:]:
            return False  # spatial loops interleaved with reduction ones: leave as it is
        spatial = list(range(first_r if reduction else len(kinds)))
        if not spatial:
            return False
        # the innermost spatial loop: vectorized, inside the reduction loops when there are any
        inner = spatial[-1]
        vec_loop = None
        if extents[inner] is not None and extents[inner] > 1:
            factor = max((f for f in range(1, lanes * 2 + 1) if extents[inner] % f == 0), default=1)
            if factor > 1:
                outer_part, vec_loop = sch.split(loops[inner], [None, factor])
                loops[inner] = outer_part
        if reduction and vec_loop is not None:
            sch.reorder(*loops[first_r:], vec_loop)
        par = [loops[i] for i in spatial]
        fused = sch.fuse(*par) if len(par) > 1 else par[0]
        sch.parallel(fused)
        if vec_loop is not None:
            sch.vectorize(vec_loop)  # before decomposing: afterwards the update is no longer a reduction block
            if reduction:
                sch.decompose_reduction(info.block_rv, loops[first_r])
        return True


def _is_contraction(block: Any) -> bool:
    """Whether a block multiplies loads of two different buffers (matmul, convolution)."""
    found = []

    def visit(node: Any) -> None:
        if isinstance(node, tirx.Mul):
            loads = [_buffer_of(x) for x in (node.a, node.b)]
            if all(loads) and loads[0] != loads[1]:
                found.append(node)

    tirx.stmt_functor.post_order_visit(block.body, visit)
    return bool(found)


def _buffer_of(expr: Any) -> Any:
    """The buffer an operand loads (through casts), or None."""
    while isinstance(expr, tirx.Cast):
        expr = expr.value
    return expr.buffer.name if isinstance(expr, tirx.BufferLoad) else None


class NormReduction(Reduction):
    """TVM's CPU ``Reduction`` rule, kept to what it was written for (softmax, norms): it also
    matches a convolution with its padding and epilogue blocks and schedules it badly."""

    def apply(self, func: Any, target: Any, tunable: bool) -> Any:
        if not isinstance(func, tirx.PrimFunc):
            return None
        sch = s_tir.Schedule(func)
        blocks = normalize_prim_func(sch)
        if blocks is None or any(_is_contraction(sch.get(b.block_rv)) for b in blocks):
            return None
        return super().apply(func, target, tunable)


DEFAULT_RULES = (GEMV(), NormReduction(), ParallelVectorize())


def apply_defaults(mod: Any, target: Any) -> tuple[Any, dict[str, str]]:
    """Schedule every not yet scheduled PrimFunc of ``mod`` with the first of
    :data:`DEFAULT_RULES` that applies; ``(module, {function: rule name})``."""
    chosen: dict[str, str] = {}
    for gvar, func in list(mod.functions_items()):
        if not isinstance(func, tirx.PrimFunc) or is_scheduled(func):
            continue
        for rule in DEFAULT_RULES:
            try:
                sch = rule.apply(func, target, False)
            except Exception:  # a rule that does not fit this function: try the next
                sch = None
            if isinstance(sch, list):
                sch = sch[0] if sch else None
            if sch is not None:
                mod[gvar] = sch.mod["main"].with_attr(SCHEDULED_ATTR, True)
                chosen[gvar.name_hint] = type(rule).__name__
                break
    return mod, chosen
