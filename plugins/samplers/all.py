"""The ``all`` sampler: measures every unmeasured candidate of the pool."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from tcl.api.interfaces import CostModel, Sampler
from tcl.api.programs import Program, Task
from tcl_plugins.samplers.measured import measured_mask


class AllSampler(Sampler):
    name = "all"

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
        return np.flatnonzero(~measured_mask(len(pool), measured))[: max(budget, 0)].tolist()
