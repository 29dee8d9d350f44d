"""A featurizer: turns the programs of one task into model inputs."""

from __future__ import annotations

import math
import zlib
from typing import Sequence

import numpy as np

from tcl.api.interfaces import Featurizer
from tcl.api.programs import Program, Task

WIDTH = 64


class InstructionCounts(Featurizer):
    """Per program, a hashed bag of its schedule's instruction kinds and of the log2 of its
    sampled decisions (tile sizes, unroll factors): ``(len(programs), 64)`` float32."""

    name = "instruction-counts"
    version = "1"  # change it whenever the features change: checkpoints store it

    def featurize(self, task: Task, programs: Sequence[Program]) -> np.ndarray:
        out = np.zeros((len(programs), WIDTH), dtype=np.float32)
        for row, program in enumerate(programs):
            instructions, decisions = program.trace if isinstance(program.trace, list) else ([], [])
            for inst in instructions:
                out[row, _bucket(str(inst[0]), WIDTH // 2)] += 1.0
            for _index, value in decisions:
                for v in np.ravel(np.asarray(value, dtype=object)):
                    if isinstance(v, (int, float)) and v > 0:
                        out[row, WIDTH // 2 + _bucket(str(len(str(v))), WIDTH // 2)] += math.log2(v)
        return out


def _bucket(text: str, size: int) -> int:
    return zlib.crc32(text.encode()) % size
