"""The layout of a ``trace-seq`` row (the package doc draws it): the instruction kinds,
annotation keys and string codes with their columns, and the table feature rows are built in.
Shared by the MetaSchedule and the TenSet row builders.
"""

from __future__ import annotations

from typing import Any

import numpy as np

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
ANNOTATE_KINDS = frozenset({"Annotate", "Unannotate"})


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


def numbers_of(obj: Any, out: list[float]) -> None:
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
            numbers_of(x, out)


class RowTable:
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
