"""An ensemble of cost models scoring together.

On tasks of operators unlike its training tasks a single model now and then ranks a very slow
program first, and which task that happens on changes with the seed and the model; averaging
several models' scores cancels most of those picks (docs/cost-models.md, "Levers"). Each
member's scores are divided by that member's typical within-task spread, measured on the
training records, so that every member weighs the same and a score means the same in every
call (MetaSchedule's search compares scores across calls). The members' disagreement is the
ensemble's uncertainty.

Members are cost-model names (trained by :meth:`fit`, member ``i`` with ``seed + i``) or
checkpoint directories (loaded and kept as they are; :meth:`fit` only measures their spread).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

import tcl
from tcl.api import discovery
from tcl.api.errors import TclError
from tcl.api.interfaces import CostModel
from tcl.api.programs import Program, ProgramSet, Task
from tcl.learning.evaluation import load_checkpoint
from tcl_plugins.cost_models.checkpoints import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_VERSION,
    CONFIG_FILE,
    read_checkpoint_config,
    timestamp,
    write_checkpoint,
)

MEMBERS_DIR = "members"
DEFAULT_MEMBERS = ("mamba", "mamba", "mamba")


def member_list(members: str | Sequence[str]) -> list[str]:
    """``"a,b"`` or ``["a", "b"]`` as a list of at least two non-empty entries."""
    entries = members.split(",") if isinstance(members, str) else list(members)
    entries = [str(e).strip() for e in entries]
    if len(entries) < 2 or not all(entries):
        raise ValueError(f"members must name two or more cost models or checkpoints, got {members!r}")
    return entries


class EnsembleCostModel(CostModel):
    """Options: ``members`` (names or checkpoint directories, a list or comma-separated; default
    three ``mamba``), and any option of the members (``epochs``, ``batch_size``, ...), given to
    every member built by name. Runtime hints (threads, verbose, cache_dir, device) reach every
    member that declares them."""

    name = "ensemble"

    def __init__(self, *, members: str | Sequence[str] = DEFAULT_MEMBERS, **options: Any) -> None:
        self.options = dict(options)
        self.members: list[CostModel] = []
        self.trained: list[bool] = []
        for entry in member_list(members):
            if (Path(entry) / CONFIG_FILE).is_file():
                hints = {k: v for k, v in options.items() if k in discovery.RUNTIME_HINTS}
                self.members.append(load_checkpoint(Path(entry), **hints))
                self.trained.append(True)
            else:
                self.members.append(discovery.registry().create("cost_models", entry, **options))
                self.trained.append(False)
        self.featurizer = self.members[0].featurizer
        self.scales = [1.0] * len(self.members)
        self.info: dict[str, Any] = {}

    def platforms(self) -> list[str]:
        return sorted({p for m in self.members for p in m.platforms()})

    def parameter_count(self) -> int | None:
        counts = [m.parameter_count() for m in self.members]
        return None if None in counts else sum(counts)

    def fit(self, train: ProgramSet, valid: ProgramSet | None = None, *, seed: int = 0) -> Mapping[str, float]:
        metrics: dict[str, float] = {}
        for i, member in enumerate(self.members):
            if not self.trained[i]:
                for key, value in (member.fit(train, valid, seed=seed + i) or {}).items():
                    metrics[f"member{i}_{key}"] = value
                self.trained[i] = True
        self.scales = [self._spread(member, train) for member in self.members]
        self.info = {"profile": train.profile, "seed": seed, "metrics": metrics}
        return metrics

    @staticmethod
    def _spread(member: CostModel, records: ProgramSet) -> float:
        """The member's median within-task standard deviation of scores on ``records``."""
        spreads = [float(np.std(member.predict(task, programs))) for task, programs in records if len(programs) > 1]
        spreads = [s for s in spreads if np.isfinite(s) and s > 0]
        if not spreads:
            raise TclError(f"ensemble: member {member.name} gives every program of every task one score")
        return float(np.median(spreads))

    def _member_scores(self, task: Task, programs: Sequence[Program]) -> np.ndarray:
        if not all(self.trained):
            raise TclError("ensemble: not trained; fit it or load a checkpoint first")
        return np.stack(
            [np.asarray(m.predict(task, programs), dtype=np.float64) / s for m, s in zip(self.members, self.scales)]
        )

    def predict(self, task: Task, programs: Sequence[Program]) -> np.ndarray:
        if not programs:
            return np.zeros((0,), dtype=np.float64)
        return self._member_scores(task, programs).mean(axis=0)

    def uncertainty(self, task: Task, programs: Sequence[Program]) -> np.ndarray:
        if not programs:
            return np.zeros((0,), dtype=np.float64)
        return self._member_scores(task, programs).std(axis=0)

    def embed(self, task: Task, programs: Sequence[Program]) -> np.ndarray:
        """The members' embeddings side by side, each scaled to a mean row norm of one."""
        parts = []
        for member in self.members:
            e = np.asarray(member.embed(task, programs), dtype=np.float64).reshape(len(programs), -1)
            norm = float(np.linalg.norm(e, axis=1).mean()) if len(e) else 0.0
            parts.append(e / norm if norm > 0 else e)
        return np.concatenate(parts, axis=1) if parts else np.zeros((0, 0))

    def save(self, path: Path) -> None:
        if not all(self.trained):
            raise TclError("ensemble: not trained; nothing to save")
        config = {
            "format": CHECKPOINT_FORMAT,
            "format_version": CHECKPOINT_VERSION,
            "model": self.name,
            "members": [
                {"dir": f"{MEMBERS_DIR}/{i}", "model": m.name, "scale": s}
                for i, (m, s) in enumerate(zip(self.members, self.scales))
            ],
            "hyper_parameters": {},
            "profile": self.info.get("profile"),
            "seed": self.info.get("seed"),
            "metrics": self.info.get("metrics", {}),
            "tcl_version": tcl.__version__,
            "date": timestamp(),
        }

        def write_members(tmp: Path) -> None:
            for i, member in enumerate(self.members):
                member.save(tmp / MEMBERS_DIR / str(i))

        write_checkpoint(Path(path), config, write_members)

    @classmethod
    def load(cls, path: Path, **hints: Any) -> "EnsembleCostModel":
        cfg_path, cfg = read_checkpoint_config(path)
        if cfg.get("model") != cls.name:
            raise TclError(f"{cfg_path}: checkpoint is of cost model '{cfg.get('model')}', not '{cls.name}'")
        entries = cfg.get("members")
        if not isinstance(entries, list) or len(entries) < 2:
            raise TclError(f"{cfg_path}: 'members' must list two or more member checkpoints")
        dirs, scales = [], []
        for i, entry in enumerate(entries):
            scale = entry.get("scale") if isinstance(entry, dict) else None
            rel = entry.get("dir") if isinstance(entry, dict) else None
            if (
                not isinstance(rel, str)
                or not isinstance(scale, (int, float))
                or isinstance(scale, bool)
                or not scale > 0
            ):
                raise TclError(f'{cfg_path}: members[{i}] must be {{"dir": ..., "scale": a positive number}}')
            member_dir = (Path(path) / rel).resolve()
            if not member_dir.is_relative_to(Path(path).resolve()):
                raise TclError(f"{cfg_path}: members[{i}] lies outside the checkpoint: {rel}")
            dirs.append(os.fspath(member_dir))
            scales.append(float(scale))
        model = cls(members=dirs, **hints)
        model.scales = scales
        model.info = {k: cfg.get(k) for k in ("profile", "seed", "metrics")}
        return model
