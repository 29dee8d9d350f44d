"""The ``random`` sampler: a uniform random subset of the pool, the baseline RDU is compared with."""

from __future__ import annotations

import zlib
from typing import Sequence

import numpy as np

from tcl.api.interfaces import CostModel, Sampler
from tcl.api.programs import Program, Task


def unmeasured_indices(pool_size: int, measured: Sequence[int]) -> np.ndarray:
    taken = np.zeros(pool_size, dtype=bool)
    taken[np.asarray(list(measured), dtype=np.int64)] = True
    return np.flatnonzero(~taken)


class RandomSampler(Sampler):
    name = "random"

    def select(
        self,
        task: Task,
        pool: Sequence[Program],
        budget: int,
        *,
        measured: Sequence[int] = (),
        model: CostModel | None = None,
        seed: int = 0,
    ) -> list[int]:
        free = unmeasured_indices(len(pool), measured)
        take = min(max(budget, 0), free.size)
        # Seeded per task so one task's choice does not depend on which tasks came before it.
        rng = np.random.default_rng([seed, zlib.crc32(task.key.encode())])
        return sorted(rng.choice(free, size=take, replace=False).tolist())
