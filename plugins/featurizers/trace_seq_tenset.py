"""``trace-seq`` rows of auto_scheduler (TenSet) steps, mapped onto the MetaSchedule layout."""

from __future__ import annotations

from typing import Any

from tcl.api.errors import TclError
from tcl_plugins.featurizers.trace_seq_layout import (
    ANN_SLOT,
    COL_OUTS,
    COL_REFS,
    COL_TENSET,
    KIND_SLOT,
    N_VALUES,
    OTHER_ANN,
    STRING_CODES,
    TENSET_ANNOTATIONS,
    TENSET_KINDS,
    VAL0,
    WIDTH,
    RowTable,
    numbers_of,
)


def tenset_rows(steps: Any, L: int, tab: RowTable) -> list[int]:
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
            numbers_of(step[1:], values)
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
