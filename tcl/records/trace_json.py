"""TVM objects as plain JSON, and live traces as TVM's trace JSON fast enough for the search.

A tuning record stores a trace as ``[insts, decisions]`` (``Trace.as_json``). ``as_json``
walks TVM's containers element by element from Python, and turning its IntImm/FloatImm into
numbers takes as long again: done per candidate, that is most of a trace-seq model's predict
time in the MetaSchedule bridge.

TVM also prints a trace as Python (``TraceAsPython``: one C++ call), one line per
instruction, and a line names everything the instruction's JSON holds: its kind, inputs,
attributes, outputs and decision. So :class:`TraceJson` converts each *distinct* line once,
from the element of ``TraceAsJSON`` at that index, and reuses it afterwards: the candidates
of a search differ in a few lines (new decisions, the postprocessing they change). The
output equals ``plain_json(trace.as_json())`` (asserted in benchmarks/bench_bridge_predict.py,
tested on matmul and softmax design spaces in tests/test_trace_json.py); the speed-up is
measured in docs/tuning.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def plain_json(obj: Any) -> Any:
    """``obj`` with TVM containers and scalars (Array, Map, IntImm, FloatImm, String) turned
    into Python lists, dicts, ints, floats and strs. ``Trace.as_json()`` keeps IntImm/FloatImm."""
    kind = type(obj)  # exact types first: parsed JSON holds nothing else
    if kind is list:
        return [plain_json(x) for x in obj]
    if kind is int or kind is str or kind is float or obj is None:
        return obj
    if isinstance(obj, (bool, int, float, str)):
        if isinstance(obj, str) and type(obj) is not str:
            return str(obj)
        return obj
    if isinstance(obj, Mapping):
        return {str(k): plain_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain_json(x) for x in obj]
    value = getattr(obj, "value", None)
    if isinstance(value, (bool, int, float)):  # IntImm / FloatImm (their type is in .ty)
        return bool(value) if str(getattr(obj, "ty", "")) == "bool" else value
    if type(obj).__name__ == "IndexMap":  # TransformLayout's input (RewriteLayout): its IR JSON, as TVM's as_json
        import tvm

        return str(tvm.ir.save_json(obj))
    if hasattr(obj, "items"):  # tvm_ffi Array / Map are sequences / mappings without subclassing list/dict
        return {str(k): plain_json(v) for k, v in obj.items()}
    if hasattr(obj, "__iter__"):
        return [plain_json(x) for x in obj]
    raise TypeError(f"not JSON-like: {type(obj).__module__}.{type(obj).__name__}")


def is_ir_json(text: str) -> bool:
    """Whether ``text`` is a TVM IR graph serialized as JSON (``tvm.ir.save_json``).

    Traces carry one as the IndexMap input of ``TransformLayout``: compact from
    ``Trace.as_json``, indented in the tuning records a JSONDatabase writes.
    """
    return text.startswith("{") and '"root_index"' in text and '"nodes"' in text


def trace_shape_problem(trace: Any) -> str | None:
    """Why ``trace`` is not ``Trace.as_json()``'s ``[insts, decisions]`` (None when it is):
    each inst ``[kind, inputs, attrs, outputs]``, each decision ``[inst_index, value]``.
    Records are checked on load, so a corrupt one is named by file and line rather than
    failing later inside a featurizer."""
    if not (isinstance(trace, list) and len(trace) == 2 and all(isinstance(part, list) for part in trace)):
        return "the trace is not [instructions, decisions]"
    insts, decisions = trace
    for i, inst in enumerate(insts):
        if not (
            isinstance(inst, list)
            and len(inst) == 4
            and isinstance(inst[0], str)
            and all(isinstance(part, list) for part in inst[1:])
        ):
            return f"instruction {i} is not [kind, inputs, attributes, outputs]"
    for decision in decisions:
        if not (
            isinstance(decision, list)
            and len(decision) == 2
            and isinstance(decision[0], int)
            and not isinstance(decision[0], bool)
            and 0 <= decision[0] < len(insts)
        ):
            return f"decision {json.dumps(decision)[:40]} is not [instruction index, value]"
    return None


class TraceJson:
    """``[insts, decisions]`` of a live Trace (postprocessing kept), memoized by printed line.

    ``max_lines`` bounds the memo: it is emptied when full (a long tuning session sees many
    tasks; a memo rebuilt from cold still saves most of the time, see the module doc).
    """

    def __init__(self, max_lines: int = 200_000) -> None:
        self.max_lines = max_lines
        self.lines: dict[str, tuple[Any, Any]] = {}  # printed line -> (inst JSON, decision JSON or None)

    def __call__(self, trace: Any) -> list[Any]:
        from tvm.s_tir.schedule import _ffi_api

        lines = list(_ffi_api.TraceAsPython(trace, False))
        raw = _ffi_api.TraceAsJSON(trace, False)
        raw_insts = raw[0]
        if len(lines) != len(raw_insts):  # an instruction printed on several lines: no memo
            return plain_json(raw)
        if len(self.lines) + len(lines) > self.max_lines:
            self.lines.clear()
        memo = self.lines
        insts: list[Any] = []
        decisions: list[Any] = []
        raw_decisions = None
        for i, line in enumerate(lines):
            known = memo.get(line)
            if known is None:
                if raw_decisions is None:
                    raw_decisions = {int(k): v for k, v in plain_json(raw[1])}
                known = memo[line] = (plain_json(raw_insts[i]), raw_decisions.get(i))
            insts.append(known[0])
            if known[1] is not None:
                decisions.append([i, known[1]])
        return [insts, decisions]


_LIVE_TRACES = TraceJson()


def trace_to_json(obj: Any) -> Any:
    """``[insts, decisions]`` of a Schedule or Trace (postprocessing kept, as TVM records it);
    JSON-like objects pass through as plain JSON."""
    trace = getattr(obj, "trace", None)
    if trace is not None and not callable(trace) and hasattr(trace, "as_json"):  # a Schedule
        obj = trace
    if hasattr(obj, "as_json") and hasattr(obj, "insts"):  # a Trace
        return _LIVE_TRACES(obj)
    return plain_json(obj)
