"""A sampler: which candidates of a task's pool to measure."""

from __future__ import annotations

from typing import Sequence

from tcl.api.interfaces import CostModel, Sampler
from tcl.api.programs import Program, Task


class EveryKthSampler(Sampler):
    """Takes every k-th unmeasured candidate: a deterministic, model-free baseline."""

    name = "every-kth"

    def __init__(self, k: int = 2) -> None:
        if k < 1:
            raise ValueError(f"k must be 1 or more, got {k}")
        self.k = k

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
        done = set(measured)
        free = [i for i in range(len(pool)) if i not in done]
        return free[:: self.k][: max(budget, 0)]
