"""What the torch cost models share: featurizer resolution, packed features, MC-dropout
residual blocks and :class:`TorchCostModel` (training, prediction, embeddings, uncertainty,
checkpoints). Each model module adds its network."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import attrs
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import tcl
from tcl.api import validation
from tcl.api.errors import TclError, one_line
from tcl.api.interfaces import CostModel, Featurizer, OnlineUpdatable
from tcl.api.programs import Program, ProgramSet, Task
from tcl.learning.record_sets import dataset_fingerprint
from tcl.learning.training import (
    Group,
    TrainConfig,
    make_groups,
    predict_groups,
    resolve_device,
    seed_everything,
    torch_threads,
    train_ranking,
)
from tcl_plugins.cost_models.checkpoints import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_VERSION,
    FISHER_FILE,
    HEADS_FILE,
    WEIGHTS_FILE,
    check_checkpoint,
    check_like_default,
    featurizer_width_error,
    load_weights,
    read_checkpoint_config,
    timestamp,
    write_checkpoint,
)
from tcl_plugins.cost_models.features import features_of, resolve_featurizer, task_features

TRAIN_OPTIONS = frozenset(attrs.fields_dict(TrainConfig))


class MCDropout(nn.Module):
    """Dropout that is on only while ``active`` is set (MC-dropout passes), whatever the mode."""

    def __init__(self, p: float = 0.1):
        super().__init__()
        self.p = p
        self.active = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(x, self.p, training=True) if self.active and self.p > 0 else x


class ResidualLinear(nn.Module):
    """x + dropout(ReLU(Linear(x)))."""

    def __init__(self, d: int, dropout: float = 0.1):
        super().__init__()
        self.linear = nn.Linear(d, d)
        self.dropout = MCDropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.dropout(F.relu(self.linear(x)))


class TorchCostModel(CostModel, OnlineUpdatable):
    """Common part of ``mlp``, ``tlp`` and ``mamba``: featurize, train, predict, save, load.

    Options (all keyword): ``featurizer`` (name or object), the fields of
    :class:`~tcl.learning.training.TrainConfig` (``epochs``, ``lr``, ``keep_by``, ...), ``cache_dir``
    (feature cache, see :mod:`tcl.records.feature_cache`), ``state_file`` (where ``fit`` keeps its
    state after each epoch, so that an interrupted fit resumes: :func:`~tcl.learning.training.train_ranking`),
    ``dropout`` (MC-dropout p), ``mc_passes`` and the architecture's own options.
    """

    name = "torch"
    default_featurizer = ""
    arch_defaults: dict[str, Any] = {}

    def __init__(
        self,
        *,
        featurizer: str | Featurizer | None = None,
        cache_dir: str | os.PathLike | None = None,
        state_file: str | os.PathLike | None = None,
        dropout: float = 0.1,
        mc_passes: int = 20,
        **options: Any,
    ):
        # Training options and their defaults live in TrainConfig alone; the rest are the architecture's.
        training = {k: v for k, v in options.items() if k in TRAIN_OPTIONS}
        arch = {k: v for k, v in options.items() if k not in TRAIN_OPTIONS}
        unknown = sorted(set(arch) - set(self.arch_defaults))
        if unknown:
            raise TypeError(f"unknown option(s) {unknown} for cost model {self.name}")
        for key, value in arch.items():
            check_like_default(f"cost model {self.name} option {key}", value, self.arch_defaults[key])
        validation.number(dropout, f"cost model {self.name} option dropout", inclusive=True)
        validation.whole(mc_passes, f"cost model {self.name} option mc_passes")
        self.featurizer = resolve_featurizer(featurizer if featurizer is not None else self.default_featurizer)
        self.train_config = TrainConfig(**training)
        self.arch = {**self.arch_defaults, **arch}
        self.dropout = dropout
        self.mc_passes = mc_passes
        self.cache_dir = cache_dir
        self.state_file = state_file
        self.in_dim: int | None = None
        self.module: nn.Module | None = None
        self.config_file: Path | None = None  # the checkpoint's config.json, once loaded from one
        self.device = resolve_device(self.train_config.device)
        self.info: dict[str, Any] = {}  # profile, dataset fingerprint, metrics, counts
        # Output layers of other platforms (multi-task transfer): profile -> decoder state dict.
        self.heads: dict[str, dict[str, torch.Tensor]] = {}
        # Diagonal Fisher information of the parameters on the platforms learned so far (continual
        # transfer's elastic penalty): parameter name -> tensor; empty when never computed.
        self.fisher: dict[str, torch.Tensor] = {}

    # -- what subclasses define
    def _build(self, in_dim: int) -> nn.Module:
        raise NotImplementedError

    def _prepare(self, features: Any) -> Any:
        """The featurizer's output for one task -> what ``collate`` slices."""
        raise NotImplementedError

    def _init_from_data(self, module: nn.Module, groups: Sequence[Group]) -> None:
        """Set data-dependent buffers (e.g. input scales) before training."""

    def _in_dim_of(self, prepared: Any) -> int:
        raise NotImplementedError

    def collate(self, parts: Sequence[tuple[Any, np.ndarray]], device: torch.device) -> Any:
        """(prepared features of a task, program indices) pairs -> one input batch for ``module``.
        Public with :meth:`featurize_set`: transfer strategies train ``module`` with their own losses."""
        raise NotImplementedError

    # -- CostModel
    def featurize_set(self, records: ProgramSet) -> dict[str, Any]:
        """Task key -> prepared features of its programs (from the feature cache when it has them)."""
        return {k: self._checked(v) for k, v in features_of(self.featurizer, records, self.cache_dir).items()}

    def fit(
        self,
        train: ProgramSet,
        valid: ProgramSet | None = None,
        *,
        seed: int = 0,
        warm_start: bool = False,
        extra_loss: Callable[[Sequence[Group]], Any] | None = None,
    ) -> Mapping[str, float]:
        """Train on ``train``. ``warm_start`` continues from the current weights (transfer
        learning) instead of a fresh network; ``extra_loss(groups)`` returns the per-batch term
        :func:`train_ranking` adds to the ranking loss (e.g. distillation)."""
        groups, counts = make_groups(train, self.featurize_set, what="training")
        valid_groups: list[Group] = []
        if valid is not None and len(valid):
            valid_groups, _ = make_groups(valid, self.featurize_set, what="validation")
        seed_everything(seed)
        if not (warm_start and self.module is not None):
            self.in_dim = self._in_dim_of(groups[0].features)
            self.module = self._build(self.in_dim)
            self.config_file = None
            with torch.no_grad():
                self._init_from_data(self.module, groups)
        self.device = resolve_device(self.train_config.device)
        result = train_ranking(
            self.module,
            self.collate,
            groups,
            valid_groups,
            config=self.train_config,
            name=self.name,
            seed=seed,
            counts=counts,
            extra_loss=extra_loss(groups) if extra_loss is not None else None,
            state_file=self.state_file,
        )
        self.info = {
            "profile": train.profile,
            "dataset_fingerprint": dataset_fingerprint(train),
            "metrics": dict(result.metrics),
            "counts": dict(result.counts),
            "seed": seed,
        }
        return dict(result.metrics)

    def clone(self) -> "TorchCostModel":
        """An independent copy (weights, heads and options), e.g. a student starting from its teacher."""
        self._require()
        twin = copy.copy(self)
        twin.module = copy.deepcopy(self.module)
        twin.train_config = copy.deepcopy(self.train_config)
        twin.info = copy.deepcopy(self.info)
        twin.heads = copy.deepcopy(self.heads)
        twin.fisher = copy.deepcopy(self.fisher)
        return twin

    def update_online(self, records: ProgramSet, *, epochs: int, seed: int) -> None:
        groups, counts = make_groups(records, self.featurize_set)
        config = attrs.evolve(self.train_config, epochs=epochs, device=str(self.device), verbose=False)
        train_ranking(self.module, self.collate, groups, None, config=config, name=self.name, seed=seed, counts=counts)

    def parameter_count(self) -> int:
        """Parameters of the network plus those of other platforms' heads."""
        own = sum(p.numel() for p in self._require().parameters())
        return own + sum(t.numel() for head in self.heads.values() for t in head.values())

    def platforms(self) -> list[str]:
        """Its own platform and those of its extra heads."""
        own = [self.info["profile"]] if self.info.get("profile") else []
        return list(dict.fromkeys([*self.heads, *own]))

    def for_platform(self, profile: str | None) -> "TorchCostModel":
        """This model scoring with ``profile``'s head when it has one (multi-task models), else itself."""
        if profile not in self.heads:
            return self
        view = self.clone()
        mine = {k: v.detach().cpu().clone() for k, v in view.module.decoder.state_dict().items()}
        view.module.decoder.load_state_dict(view.heads.pop(profile))
        view.heads[str(self.info.get("profile"))] = mine
        view.info["profile"] = profile
        return view

    def _require(self) -> nn.Module:
        if self.module is None:
            raise TclError(f"cost model {self.name} is not trained; fit it or load a checkpoint first")
        return self.module

    def _features_for(self, task: Task, programs: Sequence[Program], *, cached: bool = True) -> Any:
        cache_dir = self.cache_dir if cached else None
        return self._checked(task_features(self.featurizer, task, programs, cache_dir))

    def _checked(self, features: Any) -> Any:
        """``_prepare``, blaming the checkpoint when the featurizer gives features of another shape
        than it was trained on (a featurizer changed without a version bump)."""
        try:
            return self._prepare(features)
        except TclError as exc:
            if self.config_file is None:
                raise
            raise featurizer_width_error(
                self.config_file, self.in_dim, self.featurizer, f"other ones ({exc})"
            ) from None

    def _run(self, task: Task, programs: Sequence[Program], fn_name: str) -> np.ndarray:
        module = self._require()
        if not programs:
            return np.zeros((0,) if fn_name == "forward" else (0, self._embed_dim()), dtype=np.float64)
        feats = self._features_for(task, programs)
        module.eval()
        fn = module if fn_name == "forward" else getattr(module, fn_name)
        with torch_threads(self.train_config.threads):
            return predict_groups(
                module, self.collate, feats, len(programs), self.device, self.train_config.batch_size, fn=fn
            )

    def _embed_dim(self) -> int:
        return 256

    def predict(self, task: Task, programs: Sequence[Program]) -> np.ndarray:
        return self._run(task, programs, "forward")

    def embed(self, task: Task, programs: Sequence[Program]) -> np.ndarray:
        out = self._run(task, programs, "embed")
        return out.reshape(len(programs), -1)

    def uncertainty(
        self, task: Task, programs: Sequence[Program], passes: int | None = None, seed: int = 0
    ) -> np.ndarray:
        """Standard deviation of the scores over ``passes`` MC-dropout passes."""
        module = self._require()
        passes = passes or self.mc_passes
        if not programs:
            return np.zeros((0,), dtype=np.float64)
        # not cached: a sampler asks this of the shrinking unmeasured part of a pool, a program
        # list seen once, whose entry would only push useful ones out of the cache
        feats = self._features_for(task, programs, cached=False)
        module.eval()
        drops = [m for m in module.modules() if isinstance(m, MCDropout)]
        devices = [self.device.index or 0] if self.device.type == "cuda" else []
        with torch_threads(self.train_config.threads), torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            for m in drops:
                m.active = True
            try:
                runs = np.stack(
                    [
                        predict_groups(
                            module, self.collate, feats, len(programs), self.device, self.train_config.batch_size
                        )
                        for _ in range(max(2, passes))
                    ]
                )
            finally:
                for m in drops:
                    m.active = False
        return runs.std(axis=0)

    # -- checkpoints
    def hyper_parameters(self) -> dict[str, Any]:
        tc = self.train_config.as_dict()
        for key in ("verbose", "device", "threads"):
            tc.pop(key, None)
        return {**tc, **self.arch, "dropout": self.dropout, "mc_passes": self.mc_passes, "in_dim": self.in_dim}

    def _config(self) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT,
            "format_version": CHECKPOINT_VERSION,
            "model": self.name,
            "hyper_parameters": self.hyper_parameters(),
            "featurizer": {"name": self.featurizer.name, "version": str(self.featurizer.version)},
            "profile": self.info.get("profile"),
            "dataset_fingerprint": self.info.get("dataset_fingerprint"),
            "metrics": self.info.get("metrics", {}),
            "counts": self.info.get("counts", {}),
            "seed": self.info.get("seed"),
            "tcl_version": tcl.__version__,
            "torch_version": torch.__version__,
            "date": timestamp(),
            "transfer": self.info.get("transfer"),
            "heads": sorted(self.heads),
            "fisher": bool(self.fisher),
        }

    def save(self, path: Path) -> None:
        module = self._require()
        state = {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}
        heads, fisher = self.heads, self.fisher

        def payload(d: Path) -> None:
            torch.save(state, d / WEIGHTS_FILE)
            if heads:
                torch.save(heads, d / HEADS_FILE)
            if fisher:
                torch.save(fisher, d / FISHER_FILE)

        write_checkpoint(Path(path), self._config(), payload)

    @classmethod
    def load(
        cls,
        path: Path,
        *,
        featurizer: str | Featurizer | None = None,
        device: str = "auto",
        verbose: bool = True,
        threads: int | None = None,
        cache_dir: str | os.PathLike | None = None,
    ) -> "TorchCostModel":
        cfg_path, cfg = read_checkpoint_config(path)
        fz = check_checkpoint(cls.name, cfg_path, cfg, featurizer, cls.default_featurizer)
        hp = dict(cfg.get("hyper_parameters") or {})
        in_dim = hp.pop("in_dim", None)
        if not isinstance(in_dim, int):
            raise TclError(f"{cfg_path}: hyper_parameters.in_dim missing; the checkpoint is incomplete")
        known = (TRAIN_OPTIONS | set(cls.arch_defaults) | {"dropout", "mc_passes"}) - {"threads", "device", "verbose"}
        hp = {k: v for k, v in hp.items() if k in known}
        try:
            model = cls(featurizer=fz, device=device, verbose=verbose, threads=threads, cache_dir=cache_dir, **hp)
        except TclError as exc:
            raise TclError(f"{cfg_path}: hyper_parameters: {exc}") from None
        model.in_dim = in_dim
        model.config_file = cfg_path
        model.module = model._build(in_dim)
        weights = Path(path) / WEIGHTS_FILE
        try:
            model.module.load_state_dict(load_weights(weights))
            if cfg.get("heads"):
                weights = Path(path) / HEADS_FILE
                model.heads = load_weights(weights)
            if cfg.get("fisher"):
                weights = Path(path) / FISHER_FILE
                model.fisher = load_weights(weights)
        except (RuntimeError, ValueError, TypeError, AttributeError) as exc:
            raise TclError(f"{weights}: does not fit cost model {cls.name}: {one_line(exc)}") from None
        model.module.to(model.device).eval()
        model.info = {
            k: cfg.get(k) for k in ("profile", "dataset_fingerprint", "metrics", "counts", "seed", "transfer")
        }
        return model
