"""TVM's JSON dialect, written exactly as its JSONDatabase writes lines (so our files and TVM's
are interchangeable), and readable names of workloads.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping

from tcl.api.errors import TclError
from tcl.api.programs import workload_ir_json
from tcl.records.trace_json import plain_json


def _escape(text: str) -> str:
    out = []
    for ch in text:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\n":
            out.append("\\n")
        elif o < 0x20 or o == 0x7F:
            # TVM would write \xHH, which neither TVM's parser nor Python's can read back.
            raise ValueError(f"cannot store control character {ch!r} in a TVM JSON string")
        else:
            out.append(ch)  # non-ASCII stays raw UTF-8 (TVM writes \xHH, unreadable; both read raw)
    return '"' + "".join(out) + '"'


def tvm_json_dumps(obj: Any) -> str:
    """``obj`` as TVM's MetaSchedule ``JSONDumps`` writes it (database_utils.cc).

    No spaces; ints as ints; booleans as ``1``/``0`` (what TVM writes for trace attributes);
    floats as C++ ``setprecision(20)`` (= ``%.20g``); dict keys sorted; strings escaped like
    TVM's ``StrEscape``. Non-finite floats are refused (TVM cannot read them back).
    """
    parts: list[str] = []
    _dump(obj, parts)
    return "".join(parts)


def _dump(obj: Any, out: list[str]) -> None:
    if obj is None:
        out.append("null")
    elif isinstance(obj, bool):
        out.append("1" if obj else "0")
    elif isinstance(obj, int):
        out.append(str(int(obj)))
    elif isinstance(obj, float):
        if not math.isfinite(obj):
            raise ValueError(f"cannot store non-finite number {obj} in a TVM JSON file")
        out.append("%.20g" % obj)
    elif isinstance(obj, str):
        out.append(_escape(obj))
    elif isinstance(obj, Mapping):
        out.append("{")
        for i, key in enumerate(sorted(obj, key=str)):
            if i:
                out.append(",")
            out.append(_escape(str(key)))
            out.append(":")
            _dump(obj[key], out)
        out.append("}")
    elif isinstance(obj, (list, tuple)):
        out.append("[")
        for i, x in enumerate(obj):
            if i:
                out.append(",")
            _dump(x, out)
        out.append("]")
    else:
        _dump(plain_json(obj), out)


def workload_name(mod_b64: str, key: str = "") -> str:
    """A task name from the workload's IR JSON, without TVM: the PrimFunc's ``global_symbol``
    (else its GlobalVar name); ``main`` (what tune_tir and extract_tasks leave) becomes
    ``main_<first 8 digits of the key>`` so tasks stay distinguishable."""
    name = None
    try:
        graph = json.loads(workload_ir_json(mod_b64))
        name = _name_from_graph(graph)
    except (TclError, ValueError, KeyError, IndexError, TypeError):
        pass
    if not name:
        return f"task_{key[:8]}" if key else "task"
    if name == "main" and key:
        return f"main_{key[:8]}"
    return name


def _name_from_graph(graph: Mapping[str, Any]) -> str | None:
    nodes = graph["nodes"]

    def string(i: Any) -> str | None:
        if isinstance(i, int) and 0 <= i < len(nodes) and nodes[i].get("type") == "ffi.String":
            return nodes[i].get("data")
        return None

    root = nodes[graph["root_index"]]
    gvar_name = None
    funcs = nodes[root["data"]["functions"]]["data"]  # Map: [k0, v0, k1, v1, ...]
    for gv_idx, fn_idx in zip(funcs[::2], funcs[1::2]):
        gv = nodes[gv_idx]
        if gvar_name is None and gv.get("type") == "ir.GlobalVar":
            gvar_name = string(gv["data"].get("name_hint"))
        fn = nodes[fn_idx]
        attrs_idx = fn.get("data", {}).get("attrs") if isinstance(fn.get("data"), dict) else None
        if attrs_idx is None:
            continue
        attrs = nodes[attrs_idx]
        dict_idx = attrs.get("data", {}).get("__dict__") if isinstance(attrs.get("data"), dict) else None
        if dict_idx is None:
            continue
        kv = nodes[dict_idx]["data"]
        for k, v in zip(kv[::2], kv[1::2]):
            if string(k) == "global_symbol" and string(v):
                return string(v)
    return gvar_name
