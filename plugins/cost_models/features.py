"""Features for the built-in cost models: the featurizer a name stands for, features of a record
set (through the feature cache when given one), and the per-store and sequence layouts the
networks read.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from tcl.api.errors import TclError
from tcl.api.interfaces import Featurizer
from tcl.api.programs import Program, ProgramSet, Task


def resolve_featurizer(featurizer: str | Featurizer) -> Featurizer:
    """A featurizer object; a name is built through the plugin registry (with a fallback to
    the built-in module while its entry point is not installed yet)."""
    if not isinstance(featurizer, str):
        return featurizer
    from tcl.api.discovery import registry

    try:
        return registry().create("featurizers", featurizer)
    except TclError:
        try:
            from tcl_plugins.featurizers import register as builtin
        except ImportError:
            raise
        for record in builtin.tcl_register_featurizers():
            if record.name == featurizer:
                return record.factory()
        raise


def features_of(featurizer: Featurizer, records: ProgramSet, cache_dir: str | os.PathLike | None) -> dict[str, Any]:
    if cache_dir is not None:
        from tcl.records.feature_cache import cached_features

        return dict(cached_features(featurizer, records, cache_dir))
    return {task.key: featurizer.featurize(task, progs) for task, progs in records}


def task_features(
    featurizer: Featurizer, task: Task, programs: Sequence[Program], cache_dir: str | os.PathLike | None
) -> Any:
    """One task's features (for predicting), through the feature cache when given one."""
    if cache_dir is None:
        return featurizer.featurize(task, list(programs))
    one = ProgramSet()
    one.add(task, list(programs))
    return features_of(featurizer, one, cache_dir)[task.key]


class PackedStores:
    """Per-store features of one task packed into one array: ``data`` (total stores, F)
    float32 and ``offsets`` (n+1,), program i owning rows ``offsets[i]:offsets[i+1]``."""

    def __init__(self, arrays: Sequence[np.ndarray], in_dim: int | None = None):
        arrays = [np.asarray(a, dtype=np.float32) for a in arrays]
        for a in arrays:
            if a.ndim != 2 or (a.shape[0] and in_dim is not None and a.shape[1] != in_dim):
                raise TclError(f"per-store features must be (n_stores, {in_dim or 'F'}) arrays, got shape {a.shape}")
        dims = {a.shape[1] for a in arrays if a.shape[0]}
        if len(dims) > 1:
            raise TclError(f"per-store features of one task have different widths {sorted(dims)}")
        self.dim = in_dim or (dims.pop() if dims else 0)
        sizes = np.array([a.shape[0] for a in arrays], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(sizes)])
        nonempty = [a for a in arrays if a.shape[0]]
        self.data = np.concatenate(nonempty, axis=0) if nonempty else np.zeros((0, self.dim), np.float32)
        self.n = len(arrays)

    def __len__(self) -> int:
        return self.n

    def gather(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        starts, ends = self.offsets[idx], self.offsets[idx + 1]
        lens = ends - starts
        if lens.sum() == 0:
            return np.zeros((0, self.data.shape[1]), np.float32), np.zeros((0,), np.int64)
        rows = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends)])
        seg = np.repeat(np.arange(idx.size), lens)
        return self.data[rows], seg


def as_sequence(features: Any, in_dim: int | None = None) -> np.ndarray:
    arr = np.asarray(features, dtype=np.float32)
    if arr.ndim != 3 or (in_dim is not None and arr.shape[2] != in_dim):
        raise TclError(f"sequence features must be an (n_programs, L, {in_dim or 'F'}) array, got shape {arr.shape}")
    return arr
