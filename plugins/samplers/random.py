"""The ``random`` sampler: a uniform random subset of the pool, the baseline RDU is compared with."""

from __future__ import annotations

import zlib
from typing import Sequence

import numpy as np

from tcl.api.interfaces import CostModel, Sampler
from tcl.api.programs import Program, Task
from tcl_plugins.samplers.measured import measured_mask


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
        free = order[~measured_mask(len(pool), measured)[order]]
        return sorted(free[: max(budget, 0)].tolist())
