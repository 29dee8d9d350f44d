"""The ``xgb`` cost model: TVM MetaSchedule's XGBoost model on per-store features, behind the
cost-model interface.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

import tcl
from tcl.api.errors import TclError, one_line
from tcl.api.interfaces import CostModel, Featurizer
from tcl.api.programs import Program, ProgramSet, Task
from tcl.learning import metrics as tcl_metrics
from tcl.learning.record_sets import dataset_fingerprint
from tcl.learning.training import make_groups
from tcl_plugins.cost_models.checkpoints import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_VERSION,
    XGB_FILE,
    check_checkpoint,
    featurizer_width_error,
    read_checkpoint_config,
    timestamp,
    write_checkpoint,
)
from tcl_plugins.cost_models.features import features_of, resolve_featurizer, task_features


def _precomputed_extractor():
    """A MetaSchedule feature extractor handing out features set beforehand (our per-store
    featurizer's, possibly cached), so XGBModel sees exactly what TVM's PerStoreFeature gives
    without replaying every trace a second time."""
    import tvm
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.feature_extractor import PyFeatureExtractor

    @derived_object
    class PrecomputedFeatures(PyFeatureExtractor):
        def __init__(self):
            super().__init__()
            self.pending = None

        def extract_from(self, context, candidates):
            feats, self.pending = self.pending, None
            if feats is None or len(feats) != len(candidates):
                raise RuntimeError("PrecomputedFeatures: features were not set for these candidates")
            return [tvm.runtime.tensor(np.ascontiguousarray(f, dtype=np.float32)) for f in feats]

    return PrecomputedFeatures()


class XGBCostModel(CostModel):
    """TVM MetaSchedule's ``XGBModel`` (per-store features, PackSum, its square-error
    objective on min/latency labels), driven through its own ``update``/``predict`` with a
    ``TuneContext`` and ``MeasureCandidate``s per task.

    Options: ``featurizer`` (default ``per-store``), ``max_depth``, ``gamma``,
    ``min_child_weight``, ``eta``, ``early_stopping_rounds``, ``nthread`` (else ``threads``,
    the runtime hint ``tcl train --threads`` gives), ``cache_dir``, ``verbose``.
    """

    name = "xgb"
    default_featurizer = "per-store"
    xgb_defaults = {
        "max_depth": 10,
        "gamma": 0.001,
        "min_child_weight": 0.0,
        "eta": 0.2,
        "early_stopping_rounds": 50,
        "nthread": None,
    }

    def __init__(
        self,
        *,
        featurizer: str | Featurizer | None = None,
        cache_dir: str | os.PathLike | None = None,
        verbose: bool = True,
        threads: int | None = None,
        **options: Any,
    ):
        unknown = sorted(set(options) - set(self.xgb_defaults))
        if unknown:
            raise TypeError(f"unknown option(s) {unknown} for cost model xgb")
        self.featurizer = resolve_featurizer(featurizer if featurizer is not None else self.default_featurizer)
        self.options = {**self.xgb_defaults, **options}
        if self.options["nthread"] is None:  # the CLI's --threads, unless nthread is given
            self.options["nthread"] = threads
        self.cache_dir = cache_dir
        self.verbose = verbose
        self.model: Any = None
        self.config_file: Path | None = None  # the checkpoint's config.json, once loaded from one
        self.info: dict[str, Any] = {}
        self._mods: dict[str, Any] = {}
        self._seed = 43

    def platforms(self) -> list[str]:
        return [self.info["profile"]] if self.info.get("profile") else []

    def _new_model(self, seed: int) -> Any:
        import tvm.s_tir.meta_schedule as ms
        from tvm.s_tir.meta_schedule.cost_model.xgb_model import XGBConfig

        o = self.options
        nthread = o["nthread"] or max(1, min(os.cpu_count() or 1, 4))
        config = XGBConfig(
            max_depth=int(o["max_depth"]),
            gamma=float(o["gamma"]),
            min_child_weight=float(o["min_child_weight"]),
            eta=float(o["eta"]),
            seed=int(seed),
            nthread=int(nthread),
        )
        return ms.cost_model.XGBModel(
            extractor=_precomputed_extractor(),
            config=config,
            num_warmup_samples=0,
            early_stopping_rounds=int(o["early_stopping_rounds"]),
            verbose_eval=25 if self.verbose else 10**9,
            adaptive_training=True,
        )

    def _context_and_candidates(self, task: Task, n: int) -> tuple[Any, list[Any]]:
        """XGBModel needs a TuneContext (it groups data by the workload's hash) and one
        MeasureCandidate per program; features come from the extractor, so every candidate
        can share the untransformed schedule."""
        import tvm.s_tir.meta_schedule as ms
        from tvm.s_tir import Schedule
        from tvm.s_tir.meta_schedule.arg_info import ArgInfo

        from tcl.measurement.candidates import ensure_tensor_intrinsics

        if task.mod_b64 is None:
            raise TclError(f"cost model xgb needs the TVM workload of task {task.name} (imported records have none)")
        cached = self._mods.get(task.key)
        if cached is None:
            mod = task.module()
            func = (
                mod["main"]
                if "main" in [gv.name_hint for gv in mod.get_global_vars()]
                else mod[mod.get_global_vars()[0]]
            )
            cand = ms.MeasureCandidate(Schedule(mod), ArgInfo.from_prim_func(func))
            # The context only keys data by workload and needs no tensor intrinsics; registering
            # none ("c") spares TuneContext importing all of them (minutes on a busy machine), which
            # happens when the features came from the cache and the featurizer never ran.
            ensure_tensor_intrinsics({"kind": "c"})
            cached = (ms.TuneContext(mod=mod, task_name=task.name, num_threads=1), cand)
            self._mods[task.key] = cached
        ctx, cand = cached
        return ctx, [cand] * n

    @staticmethod
    def _store_arrays(features: Any) -> list[np.ndarray]:
        out = []
        for f in features:
            a = np.asarray(f, dtype=np.float32)
            if a.ndim != 2:
                raise TclError(f"per-store features must be (n_stores, F) arrays, got shape {a.shape}")
            out.append(a)
        return out

    def fit(self, train: ProgramSet, valid: ProgramSet | None = None, *, seed: int = 0) -> Mapping[str, float]:
        from tvm.s_tir.meta_schedule.runner import RunnerResult

        featurize = lambda rs: features_of(self.featurizer, rs, self.cache_dir)  # noqa: E731
        groups, counts = make_groups(train, featurize, what="training")
        self.model = self._new_model(seed)
        self.config_file = None
        model = self.model
        for i, g in enumerate(groups):
            ctx, cands = self._context_and_candidates(g.task, len(g))
            # adaptive training: skip the retrain after all but the last task, then train once
            model.last_train_size = 0 if i == len(groups) - 1 else 1 << 60
            model.extractor.pending = self._store_arrays(g.features)
            model.update(ctx, cands, [RunnerResult(run_secs=[float(t)], error_msg=None) for t in g.latencies])
        if model.booster is None:
            raise TclError("xgb: XGBoost trained no model (no task had store features)")
        metrics: dict[str, float] = {}
        if valid is not None and len(valid):
            vgroups, _ = make_groups(valid, featurize, what="validation")
            if vgroups:
                lats = {g.key: g.latencies for g in vgroups}
                scores = {g.key: self._predict_features(g.task, g.features) for g in vgroups}
                m = tcl_metrics.evaluate(lats, scores, weights={g.key: g.task.weight for g in vgroups})
                metrics = {f"valid_{k}": v for k, v in m.items()}
        self.info = {
            "profile": train.profile,
            "dataset_fingerprint": dataset_fingerprint(train),
            "metrics": metrics,
            "counts": counts,
            "seed": seed,
        }
        return metrics

    def _trained_width_arrays(self, features: Any) -> tuple[list[np.ndarray], int]:
        """Per-store arrays checked against the width the booster was trained on, and that width."""
        if self.model is None or self.model.booster is None:
            raise TclError("cost model xgb is not trained; fit it or load a checkpoint first")
        arrays = self._store_arrays(features)
        trained = self.model.booster.num_features()
        dim = next((a.shape[1] for a in arrays if a.size), trained)
        if dim != trained:
            raise featurizer_width_error(self.config_file, trained, self.featurizer, f"width {dim}")
        return arrays, trained

    def _predict_features(self, task: Task, features: Any) -> np.ndarray:
        arrays, dim = self._trained_width_arrays(features)
        if not arrays:
            return np.zeros((0,), dtype=np.float64)
        # PackSum drops programs without stores from the end of its bincount: give them a zero row
        arrays = [a if a.shape[0] else np.zeros((1, dim), np.float32) for a in arrays]
        ctx, cands = self._context_and_candidates(task, len(arrays))
        self.model.extractor.pending = arrays
        return np.asarray(self.model.predict(ctx, cands), dtype=np.float64)

    def predict(self, task: Task, programs: Sequence[Program]) -> np.ndarray:
        if not programs:
            return np.zeros((0,), dtype=np.float64)
        return self._predict_features(task, task_features(self.featurizer, task, programs, self.cache_dir))

    def embed(self, task: Task, programs: Sequence[Program]) -> np.ndarray:
        """XGBoost has no hidden state: the per-store features summed over stores. Programs
        without stores embed as zeros of the width the booster was trained on."""
        features = task_features(self.featurizer, task, programs, self.cache_dir) if programs else []
        arrays, dim = self._trained_width_arrays(features)
        return (
            np.stack([a.sum(0) if a.size else np.zeros(dim, np.float32) for a in arrays]).astype(np.float64)
            if arrays
            else np.zeros((0, dim))
        )

    def save(self, path: Path) -> None:
        if self.model is None or self.model.booster is None:
            raise TclError("cost model xgb is not trained; nothing to save")
        config = {
            "format": CHECKPOINT_FORMAT,
            "format_version": CHECKPOINT_VERSION,
            "model": self.name,
            "hyper_parameters": dict(self.options),
            "featurizer": {"name": self.featurizer.name, "version": str(self.featurizer.version)},
            "profile": self.info.get("profile"),
            "dataset_fingerprint": self.info.get("dataset_fingerprint"),
            "metrics": self.info.get("metrics", {}),
            "counts": self.info.get("counts", {}),
            "seed": self.info.get("seed"),
            "tcl_version": tcl.__version__,
            "date": timestamp(),
        }
        booster = self.model.booster
        write_checkpoint(Path(path), config, lambda d: booster.save_model(str(d / XGB_FILE)))

    @classmethod
    def load(
        cls,
        path: Path,
        *,
        featurizer: str | Featurizer | None = None,
        verbose: bool = True,
        cache_dir: str | os.PathLike | None = None,
        **_ignored: Any,
    ) -> "XGBCostModel":
        import xgboost as xgb

        cfg_path, cfg = read_checkpoint_config(path)
        fz = check_checkpoint(cls.name, cfg_path, cfg, featurizer, cls.default_featurizer)
        hp = {k: v for k, v in (cfg.get("hyper_parameters") or {}).items() if k in cls.xgb_defaults}
        model = cls(featurizer=fz, verbose=verbose, cache_dir=cache_dir, **hp)
        model.model = model._new_model(int(cfg.get("seed") or 0))
        booster_path = Path(path) / XGB_FILE
        if not booster_path.is_file():
            raise TclError(f"{booster_path}: missing; the checkpoint is incomplete")
        booster = xgb.Booster()
        try:
            booster.load_model(str(booster_path))
        except xgb.core.XGBoostError as exc:
            raise TclError(f"{booster_path}: unreadable XGBoost model: {one_line(exc)}") from None
        model.model.booster = booster
        model.config_file = cfg_path
        model.info = {k: cfg.get(k) for k in ("profile", "dataset_fingerprint", "metrics", "counts", "seed")}
        return model
