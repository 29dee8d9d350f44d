"""Built-in cost models: ``mlp`` (Tenset-MLP), ``tlp`` (TLP), ``mamba`` (TCL's) and ``xgb``
(TVM MetaSchedule's XGBoost model). Architectures: docs/cost-models.md.

The torch models train with :func:`tcl.learning.training.train_ranking` (LambdaRank within tasks).
``embed`` returns the hidden state before the decoder, pooled per program (the MLP's summed
store representation; the sequence models' mean over real steps). ``uncertainty`` is the
spread (standard deviation) of the scores over MC-dropout passes: dropout (p=0.1) sits in the
residual blocks and is switched on only for those passes, never in training or ``predict``.

Checkpoints are directories: ``config.json`` (model, hyper-parameters, featurizer name and
version, profile, dataset fingerprint, metrics, tcl version, date) and ``weights.pt`` (a state
dict, read with ``torch.load(weights_only=True)``), or ``xgb_model.json`` (the booster in
XGBoost's JSON format) for ``xgb``. A checkpoint is written into a temporary sibling directory
and renamed into place. Loading it with another featurizer name or version, or as another
model, raises :class:`TclError` naming the file and both values. :func:`load_model` reads any
of them.
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import tcl
from tcl.api import validation
from tcl.api.errors import TclError
from tcl.api.interfaces import CostModel, Featurizer
from tcl.api.programs import Program, ProgramSet, Task
from tcl.learning import metrics as tcl_metrics
from tcl.learning.training import (
    Group,
    TrainConfig,
    dataset_fingerprint,
    make_groups,
    predict_groups,
    resolve_device,
    seed_everything,
    torch_threads,
    train_ranking,
)

CHECKPOINT_FORMAT = "tcl-cost-model"
CHECKPOINT_VERSION = 1
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "weights.pt"
HEADS_FILE = "heads.pt"
FISHER_FILE = "fisher.pt"
XGB_FILE = "xgb_model.json"


# ---- featurizers and feature layout -------------------------------------------------------


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
            from tcl_plugins import featurizers as builtin
        except ImportError:
            raise
        for record in builtin.tcl_register_featurizers():
            if record.name == featurizer:
                return record.factory()
        raise


def _features_of(featurizer: Featurizer, records: ProgramSet, cache_dir: str | os.PathLike | None) -> dict[str, Any]:
    if cache_dir is not None:
        from tcl.records.feature_cache import cached_features

        return dict(cached_features(featurizer, records, cache_dir))
    return {task.key: featurizer.featurize(task, progs) for task, progs in records}


class _Packed:
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


def _as_sequence(features: Any, in_dim: int | None = None) -> np.ndarray:
    arr = np.asarray(features, dtype=np.float32)
    if arr.ndim != 3 or (in_dim is not None and arr.shape[2] != in_dim):
        raise TclError(f"sequence features must be an (n_programs, L, {in_dim or 'F'}) array, got shape {arr.shape}")
    return arr


# ---- modules ------------------------------------------------------------------------------


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


class MLPNet(nn.Module):
    """Tenset-MLP: per-store Linear(F,256)+ReLU, Linear(256,256)+ReLU, sum over the stores of
    each program, two residual Linear(256)+ReLU blocks, Linear(256,1).

    As TenSet's MLP does, inputs are divided per dimension by the largest magnitude seen in
    the training data (buffer ``feature_scale``, saved with the weights)."""

    def __init__(self, in_dim: int, hidden: int = 256, dropout: float = 0.1):
        super().__init__()
        self.hidden_dim = hidden
        self.register_buffer("feature_scale", torch.ones(in_dim))
        self.encoder = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.blocks = nn.ModuleList([ResidualLinear(hidden, dropout) for _ in range(2)])
        self.decoder = nn.Linear(hidden, 1)

    def embed(self, inputs: tuple[torch.Tensor, torch.Tensor, int]) -> torch.Tensor:
        x, seg, n = inputs
        h = self.encoder(x / self.feature_scale)
        pooled = h.new_zeros(n, self.hidden_dim).index_add_(0, seg, h)
        for block in self.blocks:
            pooled = block(pooled)
        return pooled

    def score_with(self, inputs: tuple[torch.Tensor, torch.Tensor, int], decoder: Any) -> torch.Tensor:
        """Scores with another output layer (``decoder(hidden) -> (..., 1)``), for multi-head training."""
        return decoder(self.embed(inputs)).squeeze(-1)

    def forward(self, inputs: tuple[torch.Tensor, torch.Tensor, int]) -> torch.Tensor:
        return self.score_with(inputs, self.decoder)


def _step_encoder(in_dim: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(in_dim, 64),
        nn.ReLU(),
        nn.Linear(64, 128),
        nn.ReLU(),
        nn.Linear(128, 256),
        nn.ReLU(),
        nn.Linear(256, 256),
        nn.ReLU(),
    )


def _step_mask(x: torch.Tensor) -> torch.Tensor:
    """True for real steps (any non-zero feature); padding rows are all zeros. A program
    with no real step keeps its first step so attention and pooling stay defined."""
    mask = x.abs().sum(-1) > 0
    empty = ~mask.any(1)
    if bool(empty.any()):
        mask[empty, 0] = True
    return mask


class _SequenceNet(nn.Module):
    """Shared by TLP and Mamba: per-step hidden states -> decoder -> sum over real steps."""

    def hidden(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:  # (n, L, 256)
        raise NotImplementedError

    def score_with(self, x: torch.Tensor, decoder: Any) -> torch.Tensor:
        """Scores with another output layer (``decoder(hidden) -> (..., 1)``), for multi-head training."""
        mask = _step_mask(x)
        h = self.hidden(x, mask)
        return (decoder(h).squeeze(-1) * mask).sum(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.score_with(x, self.decoder)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        mask = _step_mask(x)
        h = self.hidden(x, mask) * mask.unsqueeze(-1)
        return h.sum(1) / mask.sum(1, keepdim=True)


class TLPNet(_SequenceNet):
    """TLP: encoder F->64->128->256->256 (ReLU), 8-head self-attention with a residual, two
    residual Linear(256) blocks, decoder Linear(256,1), summed over steps."""

    def __init__(self, in_dim: int, heads: int = 8, dropout: float = 0.1):
        super().__init__()
        self.encoder = _step_encoder(in_dim)
        self.attention = nn.MultiheadAttention(256, heads, batch_first=True)
        self.blocks = nn.ModuleList([ResidualLinear(256, dropout) for _ in range(2)])
        self.decoder = nn.Linear(256, 1)

    def hidden(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.encoder(x)
        a, _ = self.attention(h, h, h, key_padding_mask=~mask, need_weights=False)
        h = h + a
        for block in self.blocks:
            h = block(h)
        return h


class MambaResidual(nn.Module):
    """x + dropout(Mamba(RMSNorm(x)))."""

    def __init__(self, d: int, d_state: int, d_conv: int, expand: int, dropout: float):
        super().__init__()
        from tcl.mamba import Mamba, RMSNorm

        self.norm = RMSNorm(d)
        self.mixer = Mamba(d, d_state=d_state, d_conv=d_conv, expand=expand)
        self.dropout = MCDropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.dropout(self.mixer(self.norm(x)))


class MambaNet(_SequenceNet):
    """TCL: TLP's encoder, ``layers`` residual blocks x + Mamba(RMSNorm(x)) (d_state 16,
    d_conv 4, dt_rank ceil(d/16)), decoder Linear(256,1), summed over steps.

    Defaults one block of expand 1: TLP's depth, and the width at which it trains and predicts
    about as fast as TLP on a CPU; expand 2 (mamba-ssm's default) trains 1.9x slower, and 1.2x
    even with a free scan (docs/cost-models.md)."""

    def __init__(
        self, in_dim: int, layers: int = 1, d_state: int = 16, d_conv: int = 4, expand: int = 1, dropout: float = 0.1
    ):
        super().__init__()
        self.encoder = _step_encoder(in_dim)
        self.blocks = nn.ModuleList([MambaResidual(256, d_state, d_conv, expand, dropout) for _ in range(layers)])
        self.decoder = nn.Linear(256, 1)

    def hidden(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.encoder(x)
        for block in self.blocks:
            h = block(h)
        return h


# ---- checkpoint files ---------------------------------------------------------------------


def _write_checkpoint(path: Path, config: Mapping[str, Any], write_payload) -> None:
    """Write ``config.json`` plus the payload into a temporary sibling, then rename it into
    place (an existing checkpoint at ``path`` is replaced; any other non-empty directory is
    refused)."""
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise TclError(f"{path}: exists and is not a checkpoint directory")
        if any(path.iterdir()) and not (path / CONFIG_FILE).exists():
            raise TclError(f"{path}: is a non-empty directory that is not a cost-model checkpoint; not overwriting")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.tmp-"))
    try:
        write_payload(tmp)
        text = json.dumps(config, indent=1, sort_keys=True, default=_json_default) + "\n"
        with open(tmp / CONFIG_FILE, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        for child in tmp.iterdir():
            with open(child, "rb") as f:
                os.fsync(f.fileno())
        old = None
        if path.exists():
            old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.old-"))
            os.rename(path, old / "ckpt")
        os.rename(tmp, path)
        tmp = None
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def read_checkpoint_config(path: str | os.PathLike) -> tuple[Path, dict[str, Any]]:
    """``(config file, config)`` of the checkpoint directory ``path``."""
    cfg_path = Path(path) / CONFIG_FILE
    if not cfg_path.is_file():
        raise TclError(f"{path}: not a cost-model checkpoint (no {CONFIG_FILE})")
    try:
        cfg = json.loads(cfg_path.read_text())
    except (OSError, ValueError) as exc:
        raise TclError(f"{cfg_path}: unreadable checkpoint config: {exc}") from None
    if not isinstance(cfg, dict) or cfg.get("format") != CHECKPOINT_FORMAT:
        raise TclError(f"{cfg_path}: not a {CHECKPOINT_FORMAT} config")
    version = cfg.get("format_version", 0)
    if isinstance(version, bool) or not isinstance(version, int):
        raise TclError(f"{cfg_path}: format_version must be a whole number, got {version!r}")
    if not isinstance(cfg.get("hyper_parameters", {}), dict):
        raise TclError(f"{cfg_path}: hyper_parameters must be an object, got {cfg.get('hyper_parameters')!r}")
    if version > CHECKPOINT_VERSION:
        raise TclError(
            f"{cfg_path}: checkpoint format version {cfg.get('format_version')} is newer than this tcl "
            f"reads ({CHECKPOINT_VERSION}); upgrade tcl"
        )
    return cfg_path, cfg


def _check_checkpoint(
    cls_name: str, cfg_path: Path, cfg: Mapping[str, Any], featurizer: str | Featurizer | None, default_featurizer: str
) -> Featurizer:
    """Refuse a checkpoint of another model or featurizer; return the featurizer to use."""
    if cfg.get("model") != cls_name:
        raise TclError(f"{cfg_path}: checkpoint is of cost model '{cfg.get('model')}', not '{cls_name}'")
    saved = cfg.get("featurizer") or {}
    saved_name, saved_version = str(saved.get("name")), str(saved.get("version"))
    try:
        fz = resolve_featurizer(featurizer if featurizer is not None else (saved.get("name") or default_featurizer))
    except TclError as exc:
        raise TclError(f"{cfg_path}: featurizer: {exc}") from None
    if fz.name != saved_name:
        raise TclError(f"{cfg_path}: model was trained with featurizer '{saved_name}', not '{fz.name}'")
    if str(fz.version) != saved_version:
        raise TclError(
            f"{cfg_path}: model was trained with featurizer {saved_name} version {saved_version}, "
            f"but the installed {fz.name} is version {fz.version}; retrain the model"
        )
    return fz


def _load_weights(path: Path) -> Any:
    """A state dict saved with ``torch.save``, read without running any pickled code."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise TclError(f"{path}: missing; the checkpoint is incomplete") from None
    except Exception as exc:  # noqa: BLE001 - damaged bytes can make the unpickler raise anything
        raise TclError(
            f"{path}: not a readable torch weights file ({type(exc).__name__}: {_first_line(exc)})"
        ) from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _check_like_default(what: str, value: Any, default: Any) -> None:
    """An architecture option must be of its default's kind: a whole number >= 1 where the
    default is one, a non-negative number where it is a float."""
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise TclError(f"{what} must be true or false, got {value!r}")
    elif isinstance(default, int):
        validation.whole(value, what)
    elif isinstance(default, float):
        validation.number(value, what, inclusive=True)
    elif isinstance(default, str) and not isinstance(value, str):
        raise TclError(f"{what} must be text, got {value!r}")


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S%z")


# ---- torch cost models --------------------------------------------------------------------


class TorchCostModel(CostModel):
    """Common part of ``mlp``, ``tlp`` and ``mamba``: featurize, train, predict, save, load.

    Options (all keyword): ``featurizer`` (name or object), ``epochs``, ``lr``,
    ``weight_decay``, ``batch_size``, ``grad_clip``, ``patience``, ``device``, ``verbose``,
    ``cache_dir`` (feature cache, see :mod:`tcl.records.feature_cache`), ``dropout`` (MC-dropout p),
    ``mc_passes`` and the architecture's own options.
    """

    name = "torch"
    default_featurizer = ""
    arch_defaults: dict[str, Any] = {}

    def __init__(
        self,
        *,
        featurizer: str | Featurizer | None = None,
        epochs: int = 50,
        lr: float = 7e-4,
        weight_decay: float = 1e-6,
        batch_size: int = 512,
        grad_clip: float = 0.5,
        patience: int = 10,
        device: str = "auto",
        verbose: bool = True,
        cache_dir: str | os.PathLike | None = None,
        dropout: float = 0.1,
        mc_passes: int = 20,
        threads: int | None = None,
        **arch: Any,
    ):
        unknown = sorted(set(arch) - set(self.arch_defaults))
        if unknown:
            raise TypeError(f"unknown option(s) {unknown} for cost model {self.name}")
        for key, value in arch.items():
            _check_like_default(f"cost model {self.name} option {key}", value, self.arch_defaults[key])
        validation.number(dropout, f"cost model {self.name} option dropout", inclusive=True)
        validation.whole(mc_passes, f"cost model {self.name} option mc_passes")
        self.featurizer = resolve_featurizer(featurizer if featurizer is not None else self.default_featurizer)
        self.train_config = TrainConfig(
            epochs=epochs,
            lr=lr,
            weight_decay=weight_decay,
            batch_size=batch_size,
            grad_clip=grad_clip,
            patience=patience,
            device=device,
            verbose=verbose,
            threads=threads,
        )
        self.arch = {**self.arch_defaults, **arch}
        self.dropout = dropout
        self.mc_passes = mc_passes
        self.cache_dir = cache_dir
        self.in_dim: int | None = None
        self.module: nn.Module | None = None
        self.device = resolve_device(device)
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
        """The featurizer's output for one task -> what ``_collate`` slices."""
        raise NotImplementedError

    def _init_from_data(self, module: nn.Module, groups: Sequence[Group]) -> None:
        """Set data-dependent buffers (e.g. input scales) before training."""

    def _in_dim_of(self, prepared: Any) -> int:
        raise NotImplementedError

    def _collate(self, parts: Sequence[tuple[Any, np.ndarray]], device: torch.device) -> Any:
        raise NotImplementedError

    # -- CostModel
    def _featurize_set(self, records: ProgramSet) -> dict[str, Any]:
        return {k: self._prepare(v) for k, v in _features_of(self.featurizer, records, self.cache_dir).items()}

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
        groups, counts = make_groups(train, self._featurize_set, what="training")
        valid_groups: list[Group] = []
        if valid is not None and len(valid):
            valid_groups, _ = make_groups(valid, self._featurize_set, what="validation")
        seed_everything(seed)
        if not (warm_start and self.module is not None):
            self.in_dim = self._in_dim_of(groups[0].features)
            self.module = self._build(self.in_dim)
            with torch.no_grad():
                self._init_from_data(self.module, groups)
        self.device = resolve_device(self.train_config.device)
        result = train_ranking(
            self.module,
            self._collate,
            groups,
            valid_groups,
            config=self.train_config,
            name=self.name,
            seed=seed,
            counts=counts,
            extra_loss=extra_loss(groups) if extra_loss is not None else None,
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

    def _features_for(self, task: Task, programs: Sequence[Program]) -> Any:
        return self._prepare(self.featurizer.featurize(task, list(programs)))

    def _run(self, task: Task, programs: Sequence[Program], fn_name: str) -> np.ndarray:
        module = self._require()
        if not programs:
            return np.zeros((0,) if fn_name == "forward" else (0, self._embed_dim()), dtype=np.float64)
        feats = self._features_for(task, programs)
        module.eval()
        fn = module if fn_name == "forward" else getattr(module, fn_name)
        with torch_threads(self.train_config.threads):
            return predict_groups(
                module, self._collate, feats, len(programs), self.device, self.train_config.batch_size, fn=fn
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
        feats = self._features_for(task, programs)
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
                            module, self._collate, feats, len(programs), self.device, self.train_config.batch_size
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
            "date": _now(),
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

        _write_checkpoint(Path(path), self._config(), payload)

    @classmethod
    def load(
        cls,
        path: Path,
        *,
        featurizer: str | Featurizer | None = None,
        device: str = "auto",
        verbose: bool = True,
        threads: int | None = None,
    ) -> "TorchCostModel":
        cfg_path, cfg = read_checkpoint_config(path)
        fz = _check_checkpoint(cls.name, cfg_path, cfg, featurizer, cls.default_featurizer)
        hp = dict(cfg.get("hyper_parameters") or {})
        in_dim = hp.pop("in_dim", None)
        if not isinstance(in_dim, int):
            raise TclError(f"{cfg_path}: hyper_parameters.in_dim missing; the checkpoint is incomplete")
        known = set(TrainConfig().as_dict()) | set(cls.arch_defaults) | {"dropout", "mc_passes"}
        hp = {k: v for k, v in hp.items() if k in known and k not in ("sigma", "threads", "device", "verbose")}
        try:
            model = cls(featurizer=fz, device=device, verbose=verbose, threads=threads, **hp)
        except TclError as exc:
            raise TclError(f"{cfg_path}: hyper_parameters: {exc}") from None
        model.in_dim = in_dim
        model.module = model._build(in_dim)
        weights = Path(path) / WEIGHTS_FILE
        try:
            model.module.load_state_dict(_load_weights(weights))
            if cfg.get("heads"):
                weights = Path(path) / HEADS_FILE
                model.heads = _load_weights(weights)
            if cfg.get("fisher"):
                weights = Path(path) / FISHER_FILE
                model.fisher = _load_weights(weights)
        except (RuntimeError, ValueError, TypeError, AttributeError) as exc:
            raise TclError(f"{weights}: does not fit cost model {cls.name}: {_first_line(exc)}") from None
        model.module.to(model.device).eval()
        model.info = {
            k: cfg.get(k) for k in ("profile", "dataset_fingerprint", "metrics", "counts", "seed", "transfer")
        }
        return model


class MLPCostModel(TorchCostModel):
    """Tenset-MLP over per-store features."""

    name = "mlp"
    default_featurizer = "per-store"
    arch_defaults = {"hidden": 256}

    def _build(self, in_dim: int) -> nn.Module:
        return MLPNet(in_dim, hidden=self.arch["hidden"], dropout=self.dropout)

    def _init_from_data(self, module: nn.Module, groups: Sequence[Group]) -> None:
        scale = np.zeros(module.feature_scale.shape[0], dtype=np.float64)
        for g in groups:
            if g.features.data.size:
                scale = np.maximum(scale, np.abs(g.features.data).max(0))
        scale[~(scale > 0)] = 1.0
        module.feature_scale.copy_(torch.from_numpy(scale.astype(np.float32)))

    def _embed_dim(self) -> int:
        return int(self.arch["hidden"])

    def _prepare(self, features: Any) -> _Packed:
        return features if isinstance(features, _Packed) else _Packed(list(features), self.in_dim)

    def _in_dim_of(self, prepared: _Packed) -> int:
        if not prepared.dim:
            raise TclError(f"featurizer {self.featurizer.name} gave no store features for the first task")
        return prepared.dim

    def _collate(self, parts, device):
        xs, segs, offset = [], [], 0
        for packed, idx in parts:
            x, seg = packed.gather(idx)
            xs.append(x)
            segs.append(seg + offset)
            offset += idx.size
        x = torch.from_numpy(np.concatenate(xs, axis=0)).to(device)
        seg = torch.from_numpy(np.concatenate(segs)).to(device)
        return x, seg, offset


class _SequenceCostModel(TorchCostModel):
    default_featurizer = "trace-seq"

    def _prepare(self, features: Any) -> np.ndarray:
        return _as_sequence(features, self.in_dim)

    def _in_dim_of(self, prepared: np.ndarray) -> int:
        return int(prepared.shape[2])

    def _collate(self, parts, device):
        x = np.concatenate([f[idx] for f, idx in parts], axis=0) if len(parts) > 1 else parts[0][0][parts[0][1]]
        return torch.from_numpy(np.ascontiguousarray(x)).to(device)


class TLPCostModel(_SequenceCostModel):
    """TLP over trace sequences."""

    name = "tlp"
    arch_defaults = {"heads": 8}

    def _build(self, in_dim: int) -> nn.Module:
        return TLPNet(in_dim, heads=self.arch["heads"], dropout=self.dropout)


class MambaCostModel(_SequenceCostModel):
    """TCL's Mamba model over trace sequences."""

    name = "mamba"
    arch_defaults = {"layers": 1, "d_state": 16, "d_conv": 4, "expand": 1}  # see MambaNet

    def _build(self, in_dim: int) -> nn.Module:
        a = self.arch
        return MambaNet(
            in_dim,
            layers=a["layers"],
            d_state=a["d_state"],
            d_conv=a["d_conv"],
            expand=a["expand"],
            dropout=self.dropout,
        )


# ---- TVM's XGBoost model ------------------------------------------------------------------


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
    ``min_child_weight``, ``eta``, ``early_stopping_rounds``, ``nthread``, ``cache_dir``,
    ``verbose``.
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
        **options: Any,
    ):
        unknown = sorted(set(options) - set(self.xgb_defaults))
        if unknown:
            raise TypeError(f"unknown option(s) {unknown} for cost model xgb")
        self.featurizer = resolve_featurizer(featurizer if featurizer is not None else self.default_featurizer)
        self.options = {**self.xgb_defaults, **options}
        self.cache_dir = cache_dir
        self.verbose = verbose
        self.model: Any = None
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

        featurize = lambda rs: _features_of(self.featurizer, rs, self.cache_dir)  # noqa: E731
        groups, counts = make_groups(train, featurize, what="training")
        self.model = self._new_model(seed)
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

    def _predict_features(self, task: Task, features: Any) -> np.ndarray:
        if self.model is None or self.model.booster is None:
            raise TclError("cost model xgb is not trained; fit it or load a checkpoint first")
        arrays = self._store_arrays(features)
        if not arrays:
            return np.zeros((0,), dtype=np.float64)
        dim = next((a.shape[1] for a in arrays if a.size), 164)
        # PackSum drops programs without stores from the end of its bincount: give them a zero row
        arrays = [a if a.shape[0] else np.zeros((1, dim), np.float32) for a in arrays]
        ctx, cands = self._context_and_candidates(task, len(arrays))
        self.model.extractor.pending = arrays
        return np.asarray(self.model.predict(ctx, cands), dtype=np.float64)

    def predict(self, task: Task, programs: Sequence[Program]) -> np.ndarray:
        if not programs:
            return np.zeros((0,), dtype=np.float64)
        return self._predict_features(task, self.featurizer.featurize(task, list(programs)))

    def embed(self, task: Task, programs: Sequence[Program]) -> np.ndarray:
        """XGBoost has no hidden state: the per-store features summed over stores."""
        arrays = self._store_arrays(self.featurizer.featurize(task, list(programs))) if programs else []
        dim = next((a.shape[1] for a in arrays if a.size), 164)
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
            "date": _now(),
        }
        booster = self.model.booster
        _write_checkpoint(Path(path), config, lambda d: booster.save_model(str(d / XGB_FILE)))

    @classmethod
    def load(
        cls, path: Path, *, featurizer: str | Featurizer | None = None, verbose: bool = True, **_ignored: Any
    ) -> "XGBCostModel":
        import xgboost as xgb

        cfg_path, cfg = read_checkpoint_config(path)
        fz = _check_checkpoint(cls.name, cfg_path, cfg, featurizer, cls.default_featurizer)
        hp = {k: v for k, v in (cfg.get("hyper_parameters") or {}).items() if k in cls.xgb_defaults}
        model = cls(featurizer=fz, verbose=verbose, **hp)
        model.model = model._new_model(int(cfg.get("seed") or 0))
        booster_path = Path(path) / XGB_FILE
        if not booster_path.is_file():
            raise TclError(f"{booster_path}: missing; the checkpoint is incomplete")
        booster = xgb.Booster()
        try:
            booster.load_model(str(booster_path))
        except xgb.core.XGBoostError as exc:
            raise TclError(f"{booster_path}: unreadable XGBoost model: {str(exc).splitlines()[0]}") from None
        model.model.booster = booster
        model.info = {k: cfg.get(k) for k in ("profile", "dataset_fingerprint", "metrics", "counts", "seed")}
        return model


# ---- registry -----------------------------------------------------------------------------

MODELS: dict[str, type[CostModel]] = {
    "mlp": MLPCostModel,
    "tlp": TLPCostModel,
    "mamba": MambaCostModel,
    "xgb": XGBCostModel,
}


def load_model(path: str | os.PathLike, **options: Any) -> CostModel:
    """Load any built-in checkpoint, choosing the class from its ``config.json``."""
    cfg_path, cfg = read_checkpoint_config(path)
    cls = MODELS.get(str(cfg.get("model")))
    if cls is None:
        raise TclError(
            f"{cfg_path}: cost model '{cfg.get('model')}' is not a built-in one ({', '.join(sorted(MODELS))})"
        )
    return cls.load(Path(path), **options)
