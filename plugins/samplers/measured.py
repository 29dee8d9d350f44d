"""What the built-in samplers share: which pool positions are taken already."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def measured_mask(pool_size: int, measured: Sequence[int]) -> np.ndarray:
    """True at the pool positions already measured."""
    taken = np.zeros(pool_size, dtype=bool)
    taken[np.asarray(list(measured), dtype=np.int64)] = True
    return taken
