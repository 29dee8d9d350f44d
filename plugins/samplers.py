"""Baseline samplers: ``all`` measures the whole pool, ``random`` a uniform random subset."""

from __future__ import annotations

import zlib
from typing import Sequence

import numpy as np

from tcl.api.hookspecs import hookimpl
from tcl.api.interfaces import CostModel, Sampler
from tcl.api.programs import Program, Task
from tcl.api.registrations import SamplerRegistration


def _unmeasured(pool_size: int, measured: Sequence[int]) -> np.ndarray:
    taken = np.zeros(pool_size, dtype=bool)
    taken[np.asarray(list(measured), dtype=np.int64)] = True
    return np.flatnonzero(~taken)


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
        return _unmeasured(len(pool), measured)[: max(budget, 0)].tolist()


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
        free = _unmeasured(len(pool), measured)
        take = min(max(budget, 0), free.size)
        # Seeded per task so one task's choice does not depend on which tasks came before it.
        rng = np.random.default_rng([seed, zlib.crc32(task.key.encode())])
        return sorted(rng.choice(free, size=take, replace=False).tolist())


@hookimpl
def tcl_register_samplers() -> list[SamplerRegistration]:
    return [
        SamplerRegistration(name="all", factory=AllSampler, description="measure every candidate in the pool"),
        SamplerRegistration(
            name="random", factory=RandomSampler, description="uniform random subset of the pool (baseline for RDU)"
        ),
    ]
