"""Any of our cost models as a MetaSchedule cost model, so TVM's own search can use it.

MetaSchedule's ``EvolutionarySearch`` asks ``predict(context, candidates)`` for the whole
population (512) several times per round and keeps the best across those calls, and it draws
parents by *multinomial sampling on the scores*. So the scores we hand back must be
non-negative and comparable between calls. Our models' scores are unbounded ranking scores;
:class:`ScoreScale` maps them per task with a fixed logistic of the standardized score
(mean and spread taken from the first batch of the task, renewed only after the model
changed), which keeps the order and stays in (0, 1).

Candidates become :class:`tcl.api.programs.Program` objects carrying the live schedule and no
trace JSON: the per-store featurizer reads the schedule directly and the trace-seq
featurizer turns it into trace JSON itself, so each pays only for what it uses.

``online=True`` fine-tunes a torch model (``mlp``, ``tlp``, ``mamba``) on the measurements
of the task just measured, a few epochs with the project's LambdaRank trainer, starting from
the current weights (a checkpoint's knowledge is kept, not retrained from scratch).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.cost_model import PyCostModel

from tcl.api.errors import TclError
from tcl.api.interfaces import CostModel, OnlineUpdatable
from tcl.api.programs import Program, ProgramSet, Task
from tcl.learning.evaluation import load_checkpoint
from tcl.records.pools import make_task
from tcl.tuning.pretrained import pretrained_dir


class ScoreScale:
    """A fixed monotone map of one task's scores into (0, 1): ``sigmoid((s - mean) / spread)``."""

    def __init__(self, scores: np.ndarray) -> None:
        finite = scores[np.isfinite(scores)]
        self.mean = float(finite.mean()) if finite.size else 0.0
        spread = float(finite.std()) if finite.size > 1 else 0.0
        self.spread = spread if spread > 1e-12 else 1.0

    def __call__(self, scores: np.ndarray) -> np.ndarray:
        z = np.clip((scores - self.mean) / self.spread, -30.0, 30.0)
        z = np.where(np.isfinite(z), z, -30.0)
        return 1.0 / (1.0 + np.exp(-z))


def _require_trainable(model: CostModel) -> None:
    if not isinstance(model, OnlineUpdatable):
        raise TclError(f"cost model {model.name} cannot be fine-tuned online (it does not implement OnlineUpdatable)")


class BridgeState:
    """What the MetaSchedule object delegates to (a plain class: easy to test and to time)."""

    def __init__(
        self, model: CostModel, *, online: bool = False, epochs: int = 3, max_records: int = 512, seed: int = 0
    ) -> None:
        if online:
            _require_trainable(model)
        self.model = model
        self.online = online
        self.epochs = epochs
        self.max_records = max_records
        self.seed = seed
        self.tasks: dict[tuple[str, int], Task] = {}
        self.scales: dict[str, ScoreScale] = {}
        self.measured: dict[str, list[Program]] = {}

    def task_of(self, context: Any) -> Task:
        import tvm_ffi

        mod = context.mod
        cache_key = (str(context.task_name), int(tvm_ffi.structural_hash(mod)))
        task = self.tasks.get(cache_key)
        if task is None:
            task = self.tasks[cache_key] = make_task(mod, name=str(context.task_name))
        return task

    def raw_scores(self, task: Task, candidates: Sequence[Any]) -> np.ndarray:
        import torch

        programs = [Program(task_key=task.key, trace=None, schedule=c.sch) for c in candidates]
        with torch.no_grad():
            return np.asarray(self.model.predict(task, programs), dtype=np.float64).reshape(len(programs))

    def predict(self, context: Any, candidates: Sequence[Any]) -> np.ndarray:
        if not candidates:
            return np.zeros((0,), dtype=np.float64)
        task = self.task_of(context)
        scores = self.raw_scores(task, candidates)
        scale = self.scales.get(task.key)
        if scale is None:
            scale = self.scales[task.key] = ScoreScale(scores)
        return np.ascontiguousarray(scale(scores), dtype=np.float64)

    def update(self, context: Any, candidates: Sequence[Any], results: Sequence[Any]) -> None:
        if not self.online or not candidates:
            return
        task = self.task_of(context)
        kept = self.measured.setdefault(task.key, [])
        for cand, res in zip(candidates, results):
            secs = [float(s) for s in (res.run_secs or [])]
            if res.error_msg is None and secs and all(0 < s < 1e9 for s in secs):
                kept.append(Program(task_key=task.key, trace=None, schedule=cand.sch, run_secs=tuple(secs)))
        del kept[: -self.max_records]
        if len(kept) >= 2:
            self._fine_tune(task, kept)
            self.scales.pop(task.key, None)  # the model changed: scale anew

    def _fine_tune(self, task: Task, programs: list[Program]) -> None:
        records = ProgramSet()
        records.add(task, programs)
        self.seed += 1
        self.model.update_online(records, epochs=self.epochs, seed=self.seed)


@derived_object
class BridgeCostModel(PyCostModel):
    """``ms.cost_model.PyCostModel`` around one of our :class:`~tcl.api.interfaces.CostModel` s.

    ``save``/``load`` are no-ops: MetaSchedule never calls them during tuning, and a
    fine-tuned model is saved with its own ``save`` by whoever owns it.
    """

    def __init__(self, model: CostModel, *, online: bool = False, epochs: int = 3, seed: int = 0) -> None:
        super().__init__()
        self.state = BridgeState(model, online=online, epochs=epochs, seed=seed)

    def load(self, path: str) -> None:
        pass

    def save(self, path: str) -> None:
        pass

    def update(self, context: Any, candidates: list[Any], results: list[Any]) -> None:
        self.state.update(context, candidates, results)

    def predict(self, context: Any, candidates: list[Any]) -> np.ndarray:
        return self.state.predict(context, candidates)


def load_cost_model(
    checkpoint: str | Path, *, profile: str | None = None, online: bool = False, seed: int = 0, threads: int = 1
) -> BridgeCostModel:
    """One of our checkpoints as an ``ms.cost_model.PyCostModel`` that plain ``ms.tune_tir`` and
    ``ms.relax_integration.tune_relax`` take as ``cost_model=``: a checkpoint directory (as
    ``tcl train`` writes it), or a model name (``mlp``, ``tlp``, ``mamba``) with ``profile`` for
    the pretrained checkpoint shipped for that profile."""
    path = Path(checkpoint)
    if not path.is_dir() and profile is not None:
        path = pretrained_dir(profile, str(checkpoint)) or path
    if not (path / "config.json").is_file():
        where = f" or a model with a pretrained checkpoint for {profile}" if profile else ""
        raise TclError(f"cost model {str(checkpoint)!r}: not a checkpoint directory (no config.json){where}")
    return BridgeCostModel(load_checkpoint(path, verbose=False, threads=threads), online=online, seed=seed)


@derived_object
class TimedCostModel(PyCostModel):
    """Any MetaSchedule cost model (TVM's XGB or a :class:`BridgeCostModel`), counting the
    calls and seconds of its ``predict`` and ``update``: what the cost model itself costs of
    a tuning run, measured the same way for every method."""

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.inner = inner
        self.stats = {"predict_calls": 0, "predicted": 0, "predict_s": 0.0, "updates": 0, "update_s": 0.0}

    def load(self, path: str) -> None:
        self.inner.load(path)

    def save(self, path: str) -> None:
        self.inner.save(path)

    def update(self, context: Any, candidates: list[Any], results: list[Any]) -> None:
        start = time.perf_counter()
        self.inner.update(context, candidates, results)
        self.stats["updates"] += 1
        self.stats["update_s"] += time.perf_counter() - start

    def predict(self, context: Any, candidates: list[Any]) -> np.ndarray:
        start = time.perf_counter()
        scores = self.inner.predict(context, candidates)
        self.stats["predict_calls"] += 1
        self.stats["predicted"] += len(candidates)
        self.stats["predict_s"] += time.perf_counter() - start
        return scores
