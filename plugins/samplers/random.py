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
        # One fixed order of the pool per (seed, task), taken from the front, so the choice does
        # not depend on which tasks came before, an interrupted run resumes to the same set, and
        # the same budget picks the same programs on every profile.
        rng = np.random.default_rng([seed, zlib.crc32(task.key.encode())])
        order = rng.permutation(len(pool))
        free = order[~np.isin(order, np.asarray(list(measured), dtype=np.int64))]
        return sorted(free[: max(budget, 0)].tolist())
