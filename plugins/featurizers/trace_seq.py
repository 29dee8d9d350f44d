"""The ``trace-seq`` featurizer (TLP style): one row per schedule primitive of a MetaSchedule
trace, built from memoized rows (the layout is :mod:`tcl_plugins.featurizers.trace_seq_layout`).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from tcl.api.errors import TclError
from tcl.api.interfaces import Featurizer
from tcl.api.programs import Program, Task
from tcl_plugins.featurizers.trace_seq_layout import (
    ANN_SLOT,
    ANNOTATE_KINDS,
    COL_OUTS,
    COL_POST,
    COL_REFS,
    DROPPED,
    KIND_SLOT,
    N_VALUES,
    OTHER_ANN,
    OTHER_KIND,
    STRING_CODES,
    VAL0,
    WIDTH,
    RowTable,
    numbers_of,
)
from tcl_plugins.featurizers.trace_seq_tenset import tenset_rows


def _tiling_structure(text: str) -> list[float]:
    s = text.strip('"')
    return [s.count("S"), s.count("R")]


class TraceSeqFeaturizer(Featurizer):
    """TLP-style sequence features (module doc). ``length`` (L) and ``drop_lookups`` are options."""

    name = "trace-seq"
    version = "1"
    width = WIDTH

    def __init__(self, length: int = 48, drop_lookups: bool = True) -> None:
        if int(length) < 1:
            raise TclError(f"trace-seq: length must be >= 1, got {length}")
        self.length = int(length)
        self.drop_lookups = bool(drop_lookups)
        self._kind_info = _kind_info(DROPPED if self.drop_lookups else frozenset())

    @property
    def cache_token(self) -> str:
        """Options that change the output (the feature cache keys on it)."""
        return f"L{self.length}-F{self.width}-drop{int(self.drop_lookups)}"

    def featurize(self, task: Task, programs: Sequence[Program]) -> np.ndarray:
        """``(len(programs), L, F)`` float32.

        Speed: rows are built once into a table of distinct rows and gathered with one numpy
        index. Programs of a task share most of their instructions, so rows are memoized
        within a call (``_Memo``): a program whose instructions before ``EnterPostproc`` equal
        an earlier program's (one C-level list compare) takes that prefix's rows, and the
        rows that depend on sampled values by (position, decisions); postprocessing rows by
        their content. Results equal featurizing each program alone (tested).
        """
        n, L = len(programs), self.length
        tab = RowTable()
        ids = np.zeros((n, L), dtype=np.int32)
        post = np.full(n, L, dtype=np.int32)  # first postprocessing row of each program
        used = np.zeros(n, dtype=np.int32)
        memo = _Memo()
        for p, prog in enumerate(programs):
            trace = prog.trace
            try:
                if prog.source == "tenset":
                    rows, first_post = tenset_rows(trace, L, tab), L
                else:
                    if type(trace) is not list:  # a live Trace / Schedule, or TVM containers
                        from tcl.records.trace_json import trace_to_json

                        trace = trace_to_json(trace if trace is not None else prog.schedule)
                    rows, first_post = _ms_rows(trace, L, tab, self._kind_info, memo)
            except (IndexError, KeyError, TypeError, ValueError, AttributeError) as exc:
                where = f"{prog.location}: " if prog.location else ""
                raise TclError(
                    f"{where}trace-seq: malformed {prog.source} trace (program {p} of task {task.name}): "
                    f"{type(exc).__name__}: {exc}"
                ) from None
            k = len(rows)
            if k:
                ids[p, :k] = rows
            used[p] = k
            post[p] = first_post
        table = tab.array()
        out = table[ids]  # (n, L, F); row 0 of the table is the zero row (padding)
        if n:
            pos = np.arange(L, dtype=np.int32)
            out[:, :, COL_POST] = (pos >= post[:, None]) & (pos < used[:, None])
        return out


def _ms_rows(trace: Any, L: int, tab: RowTable, info: dict[str, tuple[int, int]], memo: _Memo) -> tuple[list[int], int]:
    """Row ids of a MetaSchedule trace (``[insts, decisions]``) and its first postproc row.

    Memos (see ``featurize``): a program whose instructions before ``EnterPostproc`` equal
    those of an earlier program (one C-level list compare) reuses that prefix's rows; a row
    that depends on sampled values is looked up by its position and the decisions it depends
    on. After the prefix, each instruction equal to one seen at the same position reuses its
    row unless it used a sampled value.
    """
    try:
        insts, decisions = trace
    except (TypeError, ValueError):
        raise TclError("trace-seq: a MetaSchedule trace must be [insts, decisions]") from None
    dec = dict(decisions) if decisions else {}
    sampled: dict[str, float] = {}  # variable name -> its sampled value
    producers: dict[str, int] = {}  # variable name -> index of the sampling instruction
    rows: list[int] = []
    add = rows.append
    start = 0
    pending = None
    for pid, k, pre, entries, specs, samples in memo.prefixes:
        if len(insts) >= k and (k == len(insts) or insts[k][0] == "EnterPostproc") and insts[:k] == pre:
            pending = samples  # their values are filled in only if a row is built
            dyn = memo.dyn
            for e in entries:
                if e > 0:
                    add(e)
                    continue
                i, deps = specs[~e]
                if len(deps) == 1:
                    d = dec.get(deps[0])
                    key = (pid, i, tuple(d) if type(d) is list else d)
                else:
                    key = (pid, i, tuple(_dkey(dec.get(j)) for j in deps))
                rid = dyn.get(key)
                if rid is None:
                    if pending:
                        _fill(insts, dec, pending, sampled, producers)
                        pending = None
                    rid = dyn[key] = _row(insts[i], i, dec, sampled, producers, tab, info)[0]
                add(rid)
            start = k
            break
    trail = specs = samples = None
    if start == 0 and len(memo.prefixes) < 32:
        trail, specs, samples = [], [], []
        pid = memo.next_id
        memo.next_id += 1
    first_post = L
    per_inst, content = memo.insts, memo.content
    n = len(rows)
    if n < L:
        for i in range(start, len(insts)):
            inst = insts[i]
            slot, cat = info.get(inst[0], _OTHER_INFO)
            if cat == _DROP:
                continue
            if cat == _POSTPROC:
                if trail is not None:  # remember the prefix for the programs that follow
                    memo.prefixes.append((pid, i, insts[:i], trail, specs, samples))
                    trail = None
                if first_post == L:
                    first_post = n
            rid = 0
            seen = ckey = None
            if cat == _SIMPLE or cat == _NAMED:  # the row is a function of this key
                ckey = (inst[0], len(inst[1]), len(inst[3]), *inst[2])
                try:
                    rid = content.get(ckey, 0)
                except TypeError:  # an unhashable attribute
                    ckey = None
            elif cat == _SCAN and inst[0] == "Annotate" and len(inst[1]) == 2 and type(inst[1][1]) is not str:
                ckey = ("Annotate", len(inst[3]), inst[1][1], *inst[2])  # a literal value
                try:
                    rid = content.get(ckey, 0)
                except TypeError:
                    ckey = None
            elif cat != _SAMPLE:
                seen = per_inst.get(i)
                if seen is not None:
                    for old, r in seen:
                        if old == inst:
                            rid = r
                            break
            if not rid:
                if pending:
                    _fill(insts, dec, pending, sampled, producers)
                    pending = None
                rid, deps = _row(inst, i, dec, sampled, producers, tab, info)
                if ckey is not None:
                    content[ckey] = rid
                elif deps is None:
                    if seen is None:
                        per_inst[i] = [(inst, rid)]
                    elif len(seen) < 8:
                        seen.append((inst, rid))
                if trail is not None:
                    if deps is None:
                        trail.append(rid)
                    else:
                        trail.append(~len(specs))
                        specs.append((i, deps))
                        memo.dyn.setdefault(
                            (
                                pid,
                                i,
                                _dkey(dec.get(deps[0])) if len(deps) == 1 else tuple(_dkey(dec.get(j)) for j in deps),
                            ),
                            rid,
                        )
                        if cat == _SAMPLE:
                            samples.append(i)
            elif trail is not None:
                trail.append(rid)
            add(rid)
            n += 1
            if n >= L:
                break
    if len(rows) > L:
        del rows[L:]
    return rows, first_post


def _fill(
    insts: Sequence[Any],
    dec: Mapping[int, Any],
    samples: Sequence[int],
    sampled: dict[str, float],
    producers: dict[str, int],
) -> None:
    """Values (and producers) of the variables the sampling instructions ``samples`` made."""
    for j in samples:
        kind, _inputs, attrs, outputs = insts[j]
        _sample_values(kind, attrs, dec.get(j), outputs, sampled)
        for name in outputs:
            producers[name] = j


def _dkey(d: Any) -> Any:
    return tuple(d) if type(d) is list else d


class _Memo:
    """Per-featurize-call memo of rows.

    ``prefixes``: ``(id, k, insts[:k], entries, specs, samples)``; an entry is a row id (> 0) to
    reuse or ``~s`` (< 0): ``specs[s] = (i, deps)``, the row of instruction ``i``, looked up in
    ``dyn`` by (prefix id, ``i``, decisions of the sampling instructions ``deps``); ``samples`` are the
    prefix's sampling instructions. ``insts``: position -> [(instruction, row id)].
    ``content``: rows of instructions whose row is a function of (kind, number of inputs,
    number of outputs, attributes) -- those whose inputs are all names -- or of an Annotate's
    key and literal value.
    """

    __slots__ = ("prefixes", "insts", "content", "dyn", "next_id")

    def __init__(self) -> None:
        self.prefixes: list[tuple[int, int, list[Any], list[int], list[tuple[int, tuple[int, ...]]], list[int]]] = []
        self.insts: dict[int, list[tuple[Any, int]]] = {}
        self.content: dict[tuple[Any, ...], int] = {}
        self.dyn: dict[tuple[int, int, Any], int] = {}
        self.next_id = 0


def _row(
    inst: Any,
    i: int,
    dec: Mapping[int, Any],
    sampled: dict[str, float],
    producers: dict[str, int],
    tab: RowTable,
    info: dict[str, tuple[int, int]],
) -> tuple[int, tuple[int, ...] | None]:
    """Build the row of instruction ``i``; return its id and what it depends on: ``None``
    when nothing sampled (the row may be reused for an equal instruction), else the indices
    of the sampling instructions whose decisions determine it."""
    kind, inputs, attrs, outputs = inst
    slot, cat = info.get(kind, _OTHER_INFO)
    rid = tab.n
    tab.n = rid + 1
    r = rid * WIDTH
    ix, vx = tab.idx.extend, tab.val.extend
    deps: tuple[int, ...] | None = None
    if cat == _SIMPLE:  # inputs are all names, attrs all numbers
        refs = len(inputs)
        values = attrs
    elif cat == _SAMPLE:
        values = _sample_values(kind, attrs, dec.get(i), outputs, sampled)
        for name in outputs:
            producers[name] = i
        refs = len(inputs)
        deps = (i,)
    elif cat == _NAMED:  # inputs are all names, attrs may hold strings
        refs = len(inputs)
        values = []
        if attrs:
            if kind in ANNOTATE_KINDS:
                ix((r + ANN_SLOT.get(attrs[0], OTHER_ANN),))
                vx((1.0,))
                attrs = attrs[1:]
            numbers_of(attrs, values)
    else:  # _SCAN (and _POSTPROC): inputs may hold sampled variables, literals, lists
        codes = STRING_CODES
        refs = 0
        values = []
        used: list[int] = []
        for x in inputs:
            if type(x) is str:
                v = sampled.get(x)
                if v is not None:
                    values.append(v)
                    j = producers.get(x, -1)  # -1: unknown producer (still a dependency)
                    if j not in used:
                        used.append(j)
                elif x[:1] == '"':
                    values.extend(_tiling_structure(x))
                elif x == "None":
                    values.append(0)  # a Split factor left to inference
                else:
                    c = codes.get(x)
                    if c is None:
                        refs += 1  # a block / loop name
                    else:
                        values.append(c)
            elif type(x) is list:
                refs += len(x)
            elif x is not None:
                values.append(x)
        if attrs:
            if kind in ANNOTATE_KINDS:
                ix((r + ANN_SLOT.get(attrs[0], OTHER_ANN),))
                vx((1.0,))
                attrs = attrs[1:]
            for a in attrs:
                ta = type(a)
                if ta is int or ta is float:
                    values.append(a)
                else:
                    numbers_of(a, values)
        if used or kind in _LOCATION_KINDS:  # a loop name may be a sampled location elsewhere
            deps = tuple(used)
    ix((r + slot, r + COL_REFS, r + COL_OUTS))
    vx((1.0, refs, len(outputs)))
    if values:
        if len(values) > N_VALUES:
            values = values[:N_VALUES]
        ix(range(r + VAL0, r + VAL0 + len(values)))
        vx(values)
    return rid, deps


_SCAN, _DROP, _SAMPLE, _SIMPLE, _NAMED, _POSTPROC = range(6)


_OTHER_INFO = (OTHER_KIND, _SCAN)
#: kinds whose inputs are only block/loop names and whose attributes are only numbers
_SIMPLE_KINDS = frozenset(
    {
        "Fuse",
        "Merge",
        "Reorder",
        "ReorderBlockIterVar",
        "AddUnitLoop",
        "Parallel",
        "Vectorize",
        "Unroll",
        "ComputeInline",
        "ReverseComputeInline",
        "DecomposeReduction",
        "RFactor",
        "Blockize",
        "GetLoops",
        "GetChildBlocks",
        "GetProducers",
        "GetConsumers",
        "GetOutputBlocks",
        "DecomposePadding",
    }
)


#: kinds whose inputs are only names but whose attributes may hold strings (keys, scopes, axes)
_NAMED_KINDS = frozenset({"Unannotate", "Bind", "GetSBlock", "SetScope"})
#: kinds whose loop input may be the output of SampleComputeLocation: never reused
_LOCATION_KINDS = frozenset({"ComputeAt", "ReverseComputeAt"})


def _kind_info(drop: frozenset[str]) -> dict[str, tuple[int, int]]:
    """kind -> (one-hot column, how the hot loop treats it)."""
    out = {}
    for kind, slot in KIND_SLOT.items():
        if kind in drop:
            cat = _DROP
        elif kind.startswith("Sample"):
            cat = _SAMPLE
        elif kind in _SIMPLE_KINDS:
            cat = _SIMPLE
        elif kind in _NAMED_KINDS:
            cat = _NAMED
        elif kind == "EnterPostproc":
            cat = _POSTPROC
        else:
            cat = _SCAN
        out[kind] = (slot, cat)
    return out


def _sample_values(
    kind: str, attrs: Any, decision: Any, outputs: Sequence[str], sampled: dict[str, float]
) -> list[float]:
    """Values of a sampling instruction's row; records its outputs' values in ``sampled``."""
    if kind == "SampleCategorical":
        cands = attrs[0] if attrs else []
        if isinstance(decision, int) and 0 <= decision < len(cands):
            chosen = cands[decision]
            if outputs:
                sampled[outputs[0]] = chosen
            return [chosen, decision, len(cands)]
        return [0, -1 if decision is None else decision, len(cands)]
    values: list[float] = []
    numbers_of(attrs, values)
    if isinstance(decision, list):  # SamplePerfectTile / SamplePartitionedTile: the factors
        for name, v in zip(outputs, decision):
            sampled[name] = v
        values.extend(decision)
    elif isinstance(decision, (int, float)):  # SampleComputeLocation: the loop index
        if outputs:
            sampled[outputs[0]] = decision
        values.append(decision)
    return values
