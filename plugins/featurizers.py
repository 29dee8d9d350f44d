"""Built-in featurizers: ``per-store`` (TVM's PerStoreFeature) and ``trace-seq`` (TLP style).

``per-store``
    TVM MetaSchedule's ``PerStoreFeature``: one 164-float vector per buffer store of the
    scheduled program (Tenset-MLP sums them over stores). Output: ``list[np.ndarray]``, one
    float32 ``(n_stores, 164)`` array per program. A program's live ``schedule`` is used when
    the tuning bridge passes one; otherwise its trace is replayed on the task's workload (the
    parsed workload is cached per task). Needs TVM and a TVM workload (not for TenSet imports).
    Only the target's ``gpu`` key changes the features, so the target enters the cache token
    as ``cpu`` / ``gpu`` only.

``trace-seq``
    One vector per schedule primitive, as TLP does for auto_scheduler steps: the one-hot of
    the instruction kind, plus its numbers, log-scaled (``sign(x) * log1p(|x|)``). Output: one
    float32 ``(n_programs, L, F)`` array; traces longer than ``L`` lose their tail, shorter
    ones are zero-padded. Pure Python + numpy, no TVM. Layout of a row (``F = 81``):

    ======== ===================================================================
    0..55    kind one-hot: the 52 instruction kinds TVM 0.27 registers (``KINDS``),
             3 auto_scheduler-only steps (``FollowSplit``, ``FollowFusedSplit``,
             ``ComputeRoot``) and ``other`` (unknown kinds)
    56..69   annotation key one-hot, for Annotate / Unannotate / auto_scheduler pragmas
             (``ANNOTATION_KEYS``; unknown keys go to ``other``)
    70       1 from ``EnterPostproc`` on (postprocessor instructions)
    71       1 for auto_scheduler (TenSet) steps
    72       number of block / loop references among the inputs (e.g. loops fused)
    73       number of outputs (e.g. loops a Split makes)
    74..80   up to 7 values, in order: inputs (sampled variables resolved to their
             sampled values), numeric attributes, then the decision; strings that are
             storage scopes or thread axes become small codes (``STRING_CODES``)
    ======== ===================================================================

    One-hot and flag columns are 0/1; columns 72.. are log-scaled.

    Names of blocks, loops and variables are dropped ("abstracted"): what remains is the
    count of references, and for variables produced by sampling instructions, the sampled
    value. MetaSchedule keeps decisions apart from instructions (``[[inst_idx, decision]]``);
    they are merged into their instruction's row, and flow into the instructions that use the
    sampled variables: ``SamplePerfectTile`` carries ``[n, max_innermost, *factors]`` and the
    ``Split`` that uses its outputs carries the same factors; ``SampleCategorical`` carries
    ``[chosen value, chosen index, n candidates]`` and the ``Annotate`` using it the chosen
    value (e.g. the unroll depth); ``SampleComputeLocation`` carries its decision (the loop
    index, -1 root, -2 inline) and so does the ``ComputeAt`` that uses it.

    Structural look-ups (``GetSBlock``, ``GetLoops``, ``GetChildBlocks``, ``GetProducers``,
    ``GetConsumers``, ``GetOutputBlocks``) are dropped by default (``DROPPED``): they only
    name blocks and loops for later instructions, they are a third of a MetaSchedule trace,
    and dropping them lets ``L = 48`` hold the whole of 99 % of the traces of our data
    (docs: measured on data/bundled, 2800 candidates of 14 tasks: whole traces are 30-80
    instructions, median 40, p99 72; without the look-ups 19-55, median 29, p99 48).

    auto_scheduler steps (``Program.source == "tenset"``) use the same layout: SP, FU, RE,
    CA, CI, CHR, CHW, RF, SA map to the equivalent MetaSchedule kinds, AN to
    Unroll/Vectorize/Parallel/Bind/Tensorize by its annotation, PR to Annotate with its
    pragma key; FSP, FFSP and CR get their own slots; stage/iterator ids are kept as values
    (they are positions, not names). FSP carries the lengths of the split it follows.

Bump ``version`` of a featurizer whenever its output changes.
"""

from __future__ import annotations

import math
import time
from typing import Any, Mapping, Sequence

import numpy as np

from tcl.api.errors import TclError
from tcl.api.hookspecs import hookimpl
from tcl.api.interfaces import Featurizer
from tcl.api.programs import Program, Task
from tcl.api.registrations import FeaturizerRegistration

# ---- trace-seq ---------------------------------------------------------------------------

#: Every instruction kind TVM 0.27 registers (``InstructionKind.get`` accepts each of them).
KINDS: tuple[str, ...] = (
    # sampling
    "SamplePerfectTile",
    "SamplePartitionedTile",
    "SampleCategorical",
    "SampleComputeLocation",
    # look-ups
    "GetSBlock",
    "GetLoops",
    "GetChildBlocks",
    "GetProducers",
    "GetConsumers",
    "GetOutputBlocks",
    # loops
    "Split",
    "LoopPartition",
    "Fuse",
    "Merge",
    "Reorder",
    "ReorderBlockIterVar",
    "AddUnitLoop",
    "Parallel",
    "Vectorize",
    "Unroll",
    "Bind",
    # caches and data movement
    "CacheRead",
    "CacheWrite",
    "ReindexCacheRead",
    "ReindexCacheWrite",
    "CacheInplace",
    "CacheIndex",
    "ReIndex",
    "ReadAt",
    "WriteAt",
    "SetScope",
    "StorageAlign",
    "UnsafeSetDType",
    "RollingBuffer",
    # compute location
    "ComputeAt",
    "ReverseComputeAt",
    "ComputeInline",
    "ReverseComputeInline",
    "FuseReductionEpilogue",
    # reduction, tensorization, layout, padding
    "DecomposeReduction",
    "RFactor",
    "Blockize",
    "Tensorize",
    "TransformLayout",
    "TransformBlockLayout",
    "DecomposePadding",
    "PadEinsum",
    # annotations and markers
    "Annotate",
    "Unannotate",
    "AnnotateBufferAccess",
    "UnsafeHideBufferAccess",
    "EnterPostproc",
    # auto_scheduler steps without a MetaSchedule equivalent
    "FollowSplit",
    "FollowFusedSplit",
    "ComputeRoot",
    "other",
)
KIND_ALIASES = {"GetBlock": "GetSBlock"}  # older TVM spelling

ANNOTATION_KEYS: tuple[str, ...] = (
    "meta_schedule.parallel",
    "meta_schedule.vectorize",
    "meta_schedule.unroll_explicit",
    "meta_schedule.unroll_implicit",
    "pragma_auto_unroll_max_step",
    "pragma_unroll_explicit",
    "meta_schedule.tiling_structure",
    "meta_schedule.cooperative_fetch",
    "meta_schedule.thread_extent",
    "meta_schedule.auto_tensorize",
    "software_pipeline",
    "meta_schedule.random_compute_producer",
    "meta_schedule.layout_rewrite_preproc",
    "other",
)
ANNOTATION_ALIASES = {
    "meta_schedule.thread_extent_low_inclusive": "meta_schedule.thread_extent",
    "meta_schedule.thread_extent_high_inclusive": "meta_schedule.thread_extent",
    "meta_schedule.auto_tensorize_init": "meta_schedule.auto_tensorize",
    "software_pipeline_stage": "software_pipeline",
    "software_pipeline_order": "software_pipeline",
    "software_pipeline_async_stages": "software_pipeline",
    "auto_unroll_max_step": "pragma_auto_unroll_max_step",  # auto_scheduler's pragma
    "unroll_explicit": "pragma_unroll_explicit",
}

#: Strings that carry meaning as values (storage scopes, thread axes); others are dropped.
STRING_CODES = {
    "global": 1,
    "shared": 2,
    "shared.dyn": 3,
    "local": 4,
    "warp": 5,
    "wmma.matrix_a": 6,
    "wmma.matrix_b": 7,
    "wmma.accumulator": 8,
    "m16n8k8.matrixA": 6,
    "m16n8k8.matrixB": 7,
    "m16n8k8.matrixC": 8,
    "global.texture": 9,
    "blockIdx.x": 11,
    "blockIdx.y": 12,
    "blockIdx.z": 13,
    "threadIdx.x": 14,
    "threadIdx.y": 15,
    "threadIdx.z": 16,
    "vthread": 17,
    "vthread.x": 17,
    "vthread.y": 18,
    "vthread.z": 19,
}

#: Look-up instructions left out by default (see the module doc).
DROPPED = frozenset(
    {"GetSBlock", "GetBlock", "GetLoops", "GetChildBlocks", "GetProducers", "GetConsumers", "GetOutputBlocks"}
)

N_KINDS = len(KINDS)
N_ANN = len(ANNOTATION_KEYS)
ANN0 = N_KINDS
COL_POST = ANN0 + N_ANN
COL_TENSET = COL_POST + 1
COL_REFS = COL_TENSET + 1
COL_OUTS = COL_REFS + 1
VAL0 = COL_OUTS + 1
N_VALUES = 7
WIDTH = VAL0 + N_VALUES
NUMERIC0 = COL_REFS  # columns from here on are log-scaled

KIND_SLOT = {k: i for i, k in enumerate(KINDS)}
KIND_SLOT.update({a: KIND_SLOT[k] for a, k in KIND_ALIASES.items()})
OTHER_KIND = KIND_SLOT["other"]
ANN_SLOT = {k: ANN0 + i for i, k in enumerate(ANNOTATION_KEYS)}
ANN_SLOT.update({a: ANN_SLOT[k] for a, k in ANNOTATION_ALIASES.items()})
OTHER_ANN = ANN_SLOT["other"]
_ANNOTATE_KINDS = frozenset({"Annotate", "Unannotate"})

# auto_scheduler step -> our kind
TENSET_KINDS = {
    "SP": "Split",
    "FSP": "FollowSplit",
    "FFSP": "FollowFusedSplit",
    "FU": "Fuse",
    "RE": "Reorder",
    "CA": "ComputeAt",
    "CI": "ComputeInline",
    "CR": "ComputeRoot",
    "CHR": "CacheRead",
    "CHW": "CacheWrite",
    "RF": "RFactor",
    "SA": "StorageAlign",
    "PR": "Annotate",
    "AN": "Annotate",
}
# auto_scheduler IteratorAnnotation -> (kind, thread-axis code)
TENSET_ANNOTATIONS = {
    0: ("Annotate", 0),
    1: ("Unroll", 0),
    2: ("Vectorize", 0),
    3: ("Parallel", 0),
    4: ("Bind", STRING_CODES["vthread"]),
    5: ("Bind", STRING_CODES["blockIdx.x"]),
    6: ("Bind", STRING_CODES["threadIdx.x"]),
    7: ("Bind", STRING_CODES["blockIdx.y"]),
    8: ("Bind", STRING_CODES["threadIdx.y"]),
    9: ("Bind", STRING_CODES["blockIdx.z"]),
    10: ("Bind", STRING_CODES["threadIdx.z"]),
    11: ("Tensorize", 0),
}


def _numbers(obj: Any, out: list[float]) -> None:
    """Numeric leaves (and coded strings) of a JSON attribute, depth first."""
    if isinstance(obj, bool):
        out.append(float(obj))
    elif isinstance(obj, (int, float)):
        out.append(obj)
    elif isinstance(obj, str):
        code = STRING_CODES.get(obj)
        if code is not None:
            out.append(code)
    elif isinstance(obj, list):
        for x in obj:
            _numbers(x, out)


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
        tab = _Table()
        ids = np.zeros((n, L), dtype=np.int32)
        post = np.full(n, L, dtype=np.int32)  # first postprocessing row of each program
        used = np.zeros(n, dtype=np.int32)
        memo = _Memo()
        for p, prog in enumerate(programs):
            trace = prog.trace
            try:
                if prog.source == "tenset":
                    rows, first_post = _tenset_rows(trace, L, tab), L
                else:
                    if type(trace) is not list:  # a live Trace / Schedule, or TVM containers
                        from tcl.records.trace_json import trace_to_json

                        trace = trace_to_json(trace if trace is not None else prog.schedule)
                    rows, first_post = _ms_rows(trace, L, tab, self._kind_info, memo)
            except (IndexError, KeyError, TypeError, ValueError, AttributeError) as exc:
                raise TclError(
                    f"trace-seq: malformed {prog.source} trace (program {p} of task {task.name}): "
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


class _Table:
    """Distinct feature rows, built sparsely (column, value) and made dense once."""

    __slots__ = ("idx", "val", "n")

    def __init__(self) -> None:
        self.idx: list[int] = []
        self.val: list[float] = []
        self.n = 1  # row 0 is all zeros

    def array(self) -> np.ndarray:
        table = np.zeros((self.n, WIDTH), dtype=np.float32)
        if self.idx:
            table.reshape(-1)[np.asarray(self.idx, dtype=np.int64)] = np.asarray(self.val, dtype=np.float32)
        num = table[:, NUMERIC0:]
        np.copysign(np.log1p(np.abs(num)), num, out=num)
        return table


def _ms_rows(trace: Any, L: int, tab: _Table, info: dict[str, tuple[int, int]], memo: _Memo) -> tuple[list[int], int]:
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
    tab: _Table,
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
            if kind in _ANNOTATE_KINDS:
                ix((r + ANN_SLOT.get(attrs[0], OTHER_ANN),))
                vx((1.0,))
                attrs = attrs[1:]
            _numbers(attrs, values)
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
            if kind in _ANNOTATE_KINDS:
                ix((r + ANN_SLOT.get(attrs[0], OTHER_ANN),))
                vx((1.0,))
                attrs = attrs[1:]
            for a in attrs:
                ta = type(a)
                if ta is int or ta is float:
                    values.append(a)
                else:
                    _numbers(a, values)
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


def _tenset_rows(steps: Any, L: int, tab: _Table) -> list[int]:
    """Row ids of an auto_scheduler step list."""
    if not isinstance(steps, list):
        raise TclError("trace-seq: TenSet steps must be a list")
    ix, vx = tab.idx.extend, tab.val.extend
    splits: dict[int, list[Any]] = {}  # step index -> SP lengths, for FSP / FFSP
    rows: list[int] = []
    for pos, step in enumerate(steps[:L]):
        tag = step[0]
        kind = TENSET_KINDS.get(tag, "other")
        ann = None
        refs, outs = 0, 0
        values: list[float] = []
        if tag == "SP":  # SP stage iter extent [lengths] inner_to_outer
            lengths = [x if x is not None else 0 for x in step[4]]
            splits[pos] = lengths
            refs, outs = 1, len(lengths) + 1
            values = [*lengths, step[3] or 0, int(step[5]), step[1], step[2]]
        elif tag == "FSP":  # FSP stage iter src_step n_split: the lengths it follows
            src = splits.get(step[3], [])
            refs, outs = 1, step[4] + 1
            values = [*src[: step[4]], step[4], step[1], step[2]]
        elif tag == "FFSP":  # FFSP stage iter [src_steps] level factor_or_nparts
            level = step[4]
            factor = 1
            for s in step[3]:
                lengths = splits.get(s, [])
                factor *= lengths[level] if level < len(lengths) and lengths[level] else 1
            refs, outs = 1, 2
            values = [factor, level, int(step[5]), step[1], step[2]]
        elif tag in ("FU", "RE"):  # stage [iter ids]
            refs, outs = len(step[2]), int(tag == "FU")
            values = [step[1], *step[2]]
        elif tag == "AN":  # AN stage iter annotation
            kind, code = TENSET_ANNOTATIONS.get(step[3], ("other", 0))
            refs = 1
            values = [code, step[1], step[2]] if code else [step[1], step[2]]
            if kind == "Annotate":
                ann = OTHER_ANN
        elif tag == "PR":  # PR stage iter "auto_unroll_max_step$64"
            key, _, num = str(step[3]).partition("$")
            ann = ANN_SLOT.get(key, OTHER_ANN)
            refs = 1
            try:
                values = [float(num), step[1], step[2]]
            except ValueError:
                values = [step[1], step[2]]
        elif tag == "CA":  # CA stage target_stage target_iter
            refs = 2
            values = [step[3], step[2], step[1]]
        elif tag in ("CHR", "CHW"):  # CHR stage scope [readers] / CHW stage scope
            readers = step[3] if tag == "CHR" and len(step) > 3 else []
            refs, outs = 1 + len(readers), 1
            values = [STRING_CODES.get(step[2], 0), step[1], *readers]
        elif tag == "RF":  # RF stage iter factor_iter
            refs, outs = 1, 1
            values = [step[3], step[1], step[2]]
        else:  # CI, CR, SA and unknown steps: their numbers in order
            refs = 1
            _numbers(step[1:], values)
        rid = tab.n
        tab.n = rid + 1
        r = rid * WIDTH
        ix((r + KIND_SLOT[kind], r + COL_TENSET, r + COL_REFS, r + COL_OUTS))
        vx((1.0, 1.0, refs, outs))
        if ann is not None:
            ix((r + ann,))
            vx((1.0,))
        values = values[:N_VALUES]
        ix(range(r + VAL0, r + VAL0 + len(values)))
        vx(values)
        rows.append(rid)
    return rows


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
    _numbers(attrs, values)
    if isinstance(decision, list):  # SamplePerfectTile / SamplePartitionedTile: the factors
        for name, v in zip(outputs, decision):
            sampled[name] = v
        values.extend(decision)
    elif isinstance(decision, (int, float)):  # SampleComputeLocation: the loop index
        if outputs:
            sampled[outputs[0]] = decision
        values.append(decision)
    return values


# ---- per-store ---------------------------------------------------------------------------

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
                    except Exception as exc:  # tvm raises TVMError subclasses and ValueError
                        raise TclError(f"per-store: cannot replay a trace of task {task.name}: {exc}") from None
                cands.append(ms.MeasureCandidate(sch, args))
            for arr in self._extractor.extract_from(tc, cands):
                out.append(np.ascontiguousarray(arr.numpy(), dtype=np.float32))
        return out


def measure_speed(featurizer: Featurizer, task: Task, programs: Sequence[Program], repeat: int = 1) -> float:
    """Programs per second of ``featurizer`` on ``programs`` (best of ``repeat``)."""
    best = math.inf
    for _ in range(max(1, repeat)):
        t0 = time.perf_counter()
        featurizer.featurize(task, programs)
        best = min(best, time.perf_counter() - t0)
    return len(programs) / best if best > 0 else math.inf


@hookimpl
def tcl_register_featurizers() -> list[FeaturizerRegistration]:
    return [
        FeaturizerRegistration(
            name=PerStoreFeaturizer.name,
            factory=PerStoreFeaturizer,
            version=PerStoreFeaturizer.version,
            description="TVM PerStoreFeature: (n_stores, 164) float32 per program (Tenset-MLP input); needs TVM",
        ),
        FeaturizerRegistration(
            name=TraceSeqFeaturizer.name,
            factory=TraceSeqFeaturizer,
            version=TraceSeqFeaturizer.version,
            description=f"TLP-style primitive sequence: (n, L=48, F={WIDTH}) float32; MetaSchedule traces and TenSet steps",
        ),
    ]
