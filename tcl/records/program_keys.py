"""Stable keys of traces: how a measured record is matched back to the pool entry it was
measured from, and how candidates are deduplicated.

Keys: :func:`program_key` hashes the canonical JSON of a trace (sorted keys, no spaces,
TVM scalar objects as plain numbers, booleans as 0/1 and integral floats as integers, since
TVM's JSONDumps writes ``True`` as ``1`` and ``1.0`` as ``1``; the IndexMap of a
``TransformLayout``, which ``Trace.as_json`` writes as compact IR JSON text and a JSONDatabase
as indented text, as its parsed graph without TVM's metadata). A trace read back from a
TVM tuning record has the same key as the pool entry it was measured from, which is how
measured records are matched back to their pool entries.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

from tcl.records.trace_json import is_ir_json, plain_json, trace_to_json


def _canonical(obj: Any) -> Any:
    kind = type(obj)  # exact types first: records parsed from JSON hold nothing else
    if kind is list:
        return [_canonical(x) for x in obj]
    if kind is int or obj is None:
        return obj
    if kind is str:
        return _canonical_ir_json(obj) if is_ir_json(obj) else obj
    if kind is float:
        return int(obj) if math.isfinite(obj) and obj.is_integer() else obj
    if kind is dict:
        return {str(k): _canonical(v) for k, v in obj.items()}
    if isinstance(obj, bool):  # TVM's JSONDumps writes trace booleans as 1 / 0
        return int(obj)
    for plain in (str, int, float):  # subclasses, e.g. tvm_ffi's String
        if isinstance(obj, plain):
            return _canonical(plain(obj))
    if isinstance(obj, Mapping):
        return {str(k): _canonical(v) for k, v in obj.items()}
    if isinstance(obj, tuple):
        return [_canonical(x) for x in obj]
    return _canonical(plain_json(obj))


def _canonical_ir_json(text: str) -> Any:
    """An IR graph's JSON text (a ``TransformLayout`` IndexMap) as its graph, without TVM's
    metadata (the TVM version): compact and indented texts of one graph get one key."""
    try:
        graph = json.loads(text)
    except ValueError:
        return text
    if not isinstance(graph, dict):
        return text
    return {"ir_graph": _canonical({k: v for k, v in graph.items() if k != "metadata"})}


def canonical_json(obj: Any) -> str:
    """The canonical text of a JSON-like object: sorted keys, no spaces, bools and integral floats as ints."""
    return json.dumps(_canonical(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def program_key(trace_json: Any) -> str:
    """A stable key of a trace: sha256 (first 32 hex digits) of its canonical JSON.

    Accepts the trace JSON (``[insts, decisions]``, a TenSet steps list, or any JSON-like
    object), a ``Trace`` or a ``Schedule``.
    """
    if type(trace_json) is not list:  # a Trace, a Schedule, TVM containers (parsed records are lists)
        trace_json = trace_to_json(trace_json)
    return hashlib.sha256(canonical_json(trace_json).encode()).hexdigest()[:32]
