"""The shared trainer of torch cost models.

Loss: LambdaRank within each task. For the programs i, j of one task (one *group*) with labels
``y = min latency / latency`` in (0, 1] and scores ``s`` (higher = faster)::

    loss_g = sum_{i,j in g, y_i > y_j} |dNDCG_ij| * log2(1 + exp(-sigma * (s_i - s_j)))
    |dNDCG_ij| = |G_i - G_j| * |1/log2(1 + r_i) - 1/log2(1 + r_j)|,   G = (2^y - 1) / IDCG_g

``r`` is the 1-based rank of a program by its current score within its group (ties by
position) and ``IDCG_g`` the DCG of the ideal order: ``|dNDCG_ij|`` is how much NDCG would
change if i and j swapped places (Burges' LambdaRank weights, as in TLP). The batch loss is
the mean of ``loss_g`` over the groups of the batch that have a pair. All pairs of a batch are
formed at once with an ``(n, n)`` same-group mask, so a batch of many small tasks costs one
pass.

``TrainConfig.loss`` picks another loss (``RANKING_LOSSES``), so the choice is an ablation:
``pairwise`` is the same logistic term with every pair of a group weighing the same (RankNet),
``listmle`` the listwise negative log-likelihood of the group's true order under
Plackett-Luce (ListMLE), averaged over positions.

Batches hold whole tasks, or, for tasks with more programs than the batch size, near-equal
chunks of one task (so every chunk has pairs); chunks are shuffled and packed into batches
of at most ``batch_size`` programs.

Data hygiene (:mod:`tcl.learning.record_sets`): programs that failed, or whose latency is NaN,
infinite or not positive, are dropped before anything else (never trained on); a task left
with one program gives no pair and is skipped (counted in the log line); an empty result
raises :class:`TclError`.

The trainer is model-agnostic: a model hands it its ``torch.nn.Module`` (``module(inputs)``
returns one score per program) and a ``collate(parts, device)`` turning a list of
``(task features, program indices)`` into those inputs. It imports no plugin."""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import os
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import attrs
import numpy as np
import torch

from tcl.api import validation
from tcl.api.discovery import registry
from tcl.api.errors import TclError
from tcl.api.programs import ProgramSet, Task
from tcl.learning import metrics as tcl_metrics
from tcl.learning.record_sets import clean_records, describe_counts

log = logging.getLogger(__name__)

__all__ = [
    "TrainConfig",
    "Group",
    "TrainResult",
    "StopTraining",
    "lambdarank_loss",
    "pairwise_logistic_loss",
    "listmle_loss",
    "KEEP_BY",
    "RANKING_LOSSES",
    "make_groups",
    "make_batches",
    "train_ranking",
    "ExtraLoss",
    "predict_groups",
    "resolve_device",
    "seed_everything",
    "torch_threads",
]


Collate = Callable[[Sequence[tuple[Any, np.ndarray]], torch.device], Any]


# ``extra_loss(module, scores, batch)``: a term added to a batch's ranking loss (e.g. knowledge
# distillation); ``batch`` is the batch's ``(train group index, program indices)`` list, the index
# counting only groups of two or more programs (all of them for groups from make_groups).
ExtraLoss = Callable[[torch.nn.Module, torch.Tensor, Sequence[tuple[int, np.ndarray]]], torch.Tensor]


class StopTraining(Exception):
    """Raised by a ``tcl_on_epoch_end`` hook to stop training after this epoch (best kept)."""


@attrs.define(kw_only=True)
class TrainConfig:
    """Hyper-parameters of :func:`train_ranking` (defaults: docs/cost-models.md)."""

    epochs: int = 50
    lr: float = 7e-4
    weight_decay: float = 1e-6
    batch_size: int = 512
    grad_clip: float = 0.5
    patience: int = 10  # epochs without a better validation score (keep_by) before stopping
    keep_by: str = "pairwise"  # the validation metric that picks the kept epoch: one of KEEP_BY
    sigma: float = 1.0  # the logistic scale of the pairwise losses
    loss: str = "lambdarank"  # a key of RANKING_LOSSES
    device: str = "auto"
    verbose: bool = True
    # torch CPU threads while training (None: leave torch's setting). On a busy machine one
    # thread can be many times faster than two (OpenMP workers spin waiting for each other).
    threads: int | None = None

    def __attrs_post_init__(self) -> None:
        for key in ("epochs", "batch_size", "patience"):
            validation.whole(getattr(self, key), f"cost model option {key}")
        if self.threads is not None:
            validation.whole(self.threads, "cost model option threads")
        for key in ("lr", "grad_clip", "sigma"):
            validation.number(getattr(self, key), f"cost model option {key}")
        validation.number(self.weight_decay, "cost model option weight_decay", inclusive=True)
        if self.loss not in RANKING_LOSSES:
            raise TclError(f"cost model option loss: {self.loss!r} is none of {', '.join(RANKING_LOSSES)}")
        if self.keep_by not in KEEP_BY:
            raise TclError(f"cost model option keep_by: {self.keep_by!r} is none of {', '.join(KEEP_BY)}")

    def as_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.define(kw_only=True)
class Group:
    """The successfully measured programs of one task, with their features."""

    task: Task
    features: Any  # whatever the model's featurizer returns for these programs, in order
    latencies: np.ndarray  # float64 seconds, all finite and > 0

    @property
    def key(self) -> str:
        return self.task.key

    @property
    def labels(self) -> np.ndarray:
        return (self.latencies.min() / self.latencies).astype(np.float32)

    def __len__(self) -> int:
        return int(self.latencies.size)


@attrs.define(kw_only=True)
class TrainResult:
    metrics: dict[str, float]
    best_epoch: int
    epochs_run: int
    history: list[dict[str, float]]
    counts: dict[str, int]


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


class torch_threads:
    """Context manager: ``torch.set_num_threads(n)`` inside, the old value after (None: no-op)."""

    def __init__(self, n: int | None):
        self.n, self.old = n, None

    def __enter__(self) -> "torch_threads":
        if self.n:
            self.old = torch.get_num_threads()
            torch.set_num_threads(int(self.n))
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.old is not None:
            torch.set_num_threads(self.old)


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def make_groups(
    records: ProgramSet, featurize: Callable[[ProgramSet], Mapping[str, Any]], *, what: str = "training"
) -> tuple[list[Group], dict[str, int]]:
    """Clean ``records``, featurize the survivors (``featurize(clean) -> {task key:
    features}``) and return one :class:`Group` per task with at least two programs.

    Raises TclError when nothing trainable is left (for ``what="training"``).
    """
    clean, counts = clean_records(records)
    keep = clean.subset([k for k, progs in clean.programs.items() if len(progs) >= 2])
    if what == "training" and not len(keep):
        if not len(clean):
            raise TclError(
                f"no {what} data: none of the {counts['programs']} programs in "
                f"{counts['tasks']} tasks has a successful finite measurement"
            )
        raise TclError(
            f"no {what} data: none of the {counts['tasks']} tasks has two or more successful "
            f"programs, and the ranking loss needs pairs within a task"
        )
    feats = featurize(keep) if len(keep) else {}
    groups = []
    for task, progs in keep:
        groups.append(
            Group(task=task, features=feats[task.key], latencies=np.array([p.latency for p in progs], dtype=np.float64))
        )
    counts["groups"] = len(groups)
    counts["used_programs"] = sum(len(g) for g in groups)
    return groups, counts


def lambdarank_loss(
    scores: torch.Tensor, labels: torch.Tensor, groups: torch.Tensor, sigma: float = 1.0, eps: float = 1e-10
) -> torch.Tensor:
    """LambdaRank (NDCG-weighted pairwise logistic) loss within groups; see the module doc.

    ``scores`` (n,) float with grad, ``labels`` (n,) in [0, 1], ``groups`` (n,) int64 ids in
    ``0..G-1``. Returns the mean over groups that have a pair (0 when none has one).
    """
    n = scores.shape[0]
    if n < 2:
        return scores.sum() * 0.0
    labels = labels.to(scores.dtype)
    same = groups[:, None] == groups[None, :]
    with torch.no_grad():
        idx = torch.arange(n, device=scores.device)
        earlier = idx[None, :] < idx[:, None]  # [i, j]: j listed before i
        s = scores.detach()
        ahead = (s[None, :] > s[:, None]) | ((s[None, :] == s[:, None]) & earlier)
        rank = 1 + (ahead & same).sum(1)
        ideal_ahead = (labels[None, :] > labels[:, None]) | ((labels[None, :] == labels[:, None]) & earlier)
        ideal_rank = 1 + (ideal_ahead & same).sum(1)
        gain = torch.pow(2.0, labels) - 1.0
        n_groups = int(groups.max()) + 1
        idcg = torch.zeros(n_groups, dtype=scores.dtype, device=scores.device)
        idcg.index_add_(0, groups, gain / torch.log2(1.0 + ideal_rank.to(scores.dtype)))
        g = gain / idcg[groups].clamp(min=eps)
        disc = 1.0 / torch.log2(1.0 + rank.to(scores.dtype))
        weight = (g[:, None] - g[None, :]).abs() * (disc[:, None] - disc[None, :]).abs()
        pair = _ordered_pairs(labels, groups)
        has_pair = torch.zeros(n_groups, dtype=torch.bool, device=scores.device)
        has_pair[groups[pair.any(1)]] = True
        n_with_pairs = int(has_pair.sum())
    if n_with_pairs == 0:
        return scores.sum() * 0.0
    return (weight * _pair_logistic(scores, sigma))[pair].sum() / n_with_pairs


def _ordered_pairs(labels: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """[i, j] is True where i and j share a group and i's label is the higher."""
    return (groups[:, None] == groups[None, :]) & (labels[:, None] > labels[None, :])


def _pair_logistic(scores: torch.Tensor, sigma: float) -> torch.Tensor:
    """[i, j] = -log2 sigmoid(sigma * (s_i - s_j)): the cost of i not scoring above j."""
    return torch.nn.functional.softplus(-sigma * (scores[:, None] - scores[None, :])) / math.log(2.0)


def pairwise_logistic_loss(
    scores: torch.Tensor, labels: torch.Tensor, groups: torch.Tensor, sigma: float = 1.0
) -> torch.Tensor:
    """RankNet: the logistic loss of every ordered pair of a group, pairs weighing the same;
    the mean over a group's pairs, then over the groups that have a pair."""
    pair = _ordered_pairs(labels.to(scores.dtype), groups)
    if not bool(pair.any()):
        return scores.sum() * 0.0
    with torch.no_grad():
        pairs_of_group = torch.zeros(int(groups.max()) + 1, dtype=scores.dtype, device=scores.device)
        pairs_of_group.index_add_(0, groups, pair.sum(1).to(scores.dtype))
        weight = (1.0 / pairs_of_group.clamp(min=1.0))[groups][:, None].expand_as(pair)
        n_with_pairs = int((pairs_of_group > 0).sum())
    return (weight * _pair_logistic(scores, sigma))[pair].sum() / n_with_pairs


def listmle_loss(scores: torch.Tensor, labels: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """ListMLE: minus the log-likelihood of each group's order by label under Plackett-Luce
    (the fastest program picked first from all, the next from the rest, ...), averaged over
    positions, then over the groups with two or more programs."""
    losses = []
    for g in torch.unique(groups):
        members = groups == g
        if int(members.sum()) < 2:
            continue
        ordered = scores[members][torch.argsort(labels[members], descending=True, stable=True)]
        rest = torch.logcumsumexp(ordered.flip(0), dim=0).flip(0)  # log sum exp of positions i..end
        losses.append((rest - ordered)[:-1].mean())
    return torch.stack(losses).mean() if losses else scores.sum() * 0.0


# validation metrics TrainConfig.keep_by may choose the kept epoch by: pooled Top-1 turns on a
# few heavy tasks, so on a small validation part it can swing from epoch to epoch; pairwise
# accuracy counts every task's pairs
KEEP_BY = ("top1", "top5", "pairwise")

# name -> loss(scores, labels, groups, sigma); TrainConfig.loss picks one
RANKING_LOSSES: dict[str, Callable[..., torch.Tensor]] = {
    "lambdarank": lambdarank_loss,
    "pairwise": pairwise_logistic_loss,
    "listmle": lambda scores, labels, groups, sigma=1.0: listmle_loss(scores, labels, groups),
}


def make_batches(sizes: Sequence[int], batch_size: int, rng: np.random.Generator) -> list[list[tuple[int, np.ndarray]]]:
    """Batches of ``(group index, program indices)``: groups larger than ``batch_size`` are
    cut into near-equal shuffled chunks, chunks are shuffled and packed greedily."""
    chunks: list[tuple[int, np.ndarray]] = []
    for gi, n in enumerate(sizes):
        if n < 2:
            continue
        perm = rng.permutation(n)
        for part in np.array_split(perm, math.ceil(n / batch_size)):
            chunks.append((gi, np.sort(part)))
    order = rng.permutation(len(chunks))
    batches: list[list[tuple[int, np.ndarray]]] = []
    current: list[tuple[int, np.ndarray]] = []
    size = 0
    for ci in order:
        chunk = chunks[ci]
        if current and size + chunk[1].size > batch_size:
            batches.append(current)
            current, size = [], 0
        current.append(chunk)
        size += chunk[1].size
    if current:
        batches.append(current)
    return batches


def _eval_batches(n: int, batch_size: int) -> list[np.ndarray]:
    return [np.arange(i, min(n, i + batch_size)) for i in range(0, n, batch_size)]


@torch.no_grad()
def predict_groups(
    module: torch.nn.Module,
    collate: Collate,
    features: Any,
    n: int,
    device: torch.device,
    batch_size: int = 512,
    fn: Callable[[Any], torch.Tensor] | None = None,
) -> np.ndarray:
    """Run ``fn(inputs)`` (default ``module(inputs)``) over the ``n`` programs of one task's
    ``features`` in batches; concatenated as numpy on the CPU. The caller sets train/eval."""
    fn = fn or module
    outs = []
    for idx in _eval_batches(n, batch_size):
        outs.append(fn(collate([(features, idx)], device)).float().cpu())
    if not outs:
        return np.zeros((0,), dtype=np.float64)
    return torch.cat(outs).numpy().astype(np.float64)


def evaluate_groups(
    module: torch.nn.Module, collate: Collate, groups: Sequence[Group], device: torch.device, batch_size: int = 512
) -> dict[str, float]:
    module.eval()
    lats = {g.key: g.latencies for g in groups}
    scores = {g.key: predict_groups(module, collate, g.features, len(g), device, batch_size) for g in groups}
    weights = {g.key: g.task.weight for g in groups}
    return tcl_metrics.evaluate(lats, scores, weights=weights)


def _emit(line: str, verbose: bool = True) -> None:
    """Log ``line``; with ``verbose`` also print it to stderr (the per-epoch progress)."""
    log.info("%s", line)
    if verbose:
        print(line, file=sys.stderr, flush=True)


def _call_epoch_hook(name: str, epoch: int, metrics: Mapping[str, float], warned: list[bool]) -> None:
    try:
        registry().hook.tcl_on_epoch_end(model=name, epoch=epoch, metrics=dict(metrics))
    except StopTraining:
        raise
    except TclError:
        raise
    except Exception as exc:  # a broken observer must not end a long training run
        if not warned[0]:
            log.warning("tcl_on_epoch_end hook failed (ignored from now on): %s: %s", type(exc).__name__, exc)
            warned[0] = True


def train_ranking(
    module: torch.nn.Module,
    collate: Collate,
    train: Sequence[Group],
    valid: Sequence[Group] | None = None,
    *,
    config: TrainConfig | None = None,
    name: str = "model",
    seed: int = 0,
    counts: Mapping[str, int] | None = None,
    extra_loss: ExtraLoss | None = None,
    state_file: str | os.PathLike | None = None,
) -> TrainResult:
    """Train ``module`` with ``config.loss`` (LambdaRank by default; plus ``extra_loss``, if
    given) on ``train`` groups; keep the best epoch.

    With ``valid`` groups the best epoch is the one with the best validation ``keep_by`` metric
    and training stops after ``patience`` epochs without improvement; without them the best is
    the lowest training ranking loss. The module is left on the chosen device with the best weights.

    ``state_file``: after every epoch the whole training state (weights, optimizer, random
    generators, best epoch so far) is written there, and a run that finds the file goes on from
    it, ending with the same weights as a run never stopped; the caller deletes it once the
    result is saved. A file left by a training of other data, options or seed is refused.
    """
    config = config or TrainConfig()
    with torch_threads(config.threads):
        return _train_ranking(module, collate, train, valid, config, name, seed, counts, extra_loss, state_file)


def _training_key(
    module: torch.nn.Module, train: Sequence[Group], valid: Sequence[Group], config: TrainConfig, name: str, seed: int
) -> str:
    """What a saved training state must match to be resumed: the recipe, seed, data and shapes."""
    recipe = {k: v for k, v in config.as_dict().items() if k not in ("verbose", "threads", "device")}
    data = [[[g.key, len(g), float(g.latencies.sum())] for g in part] for part in (train, valid)]
    shapes = [[k, list(v.shape)] for k, v in module.state_dict().items()]
    text = json.dumps([name, seed, recipe, data, shapes], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _save_state(path: Path, state: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        torch.save(state, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _load_state(path: Path, key: str) -> dict[str, Any] | None:
    if not path.exists():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 - any unreadable file gets the same advice (torch's own text is cryptic)
        raise TclError(f"{path}: cannot be read as a saved training state; delete it to start afresh") from None
    if not isinstance(state, dict) or state.get("key") != key:
        raise TclError(
            f"{path}: holds the state of a training with other data, options or seed; delete it to start afresh"
        )
    return state


def _train_ranking(
    module: torch.nn.Module,
    collate: Collate,
    train: Sequence[Group],
    valid: Sequence[Group] | None,
    config: TrainConfig,
    name: str,
    seed: int,
    counts: Mapping[str, int] | None,
    extra_loss: ExtraLoss | None = None,
    state_file: str | os.PathLike | None = None,
) -> TrainResult:
    train = [g for g in train if len(g) >= 2]
    if not train:
        raise TclError("no training data: no task with two or more successful programs")
    valid = [g for g in (valid or ()) if len(g) >= 2]
    device = resolve_device(config.device)
    module.to(device)
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    decay, no_decay = [], []
    for _pname, p in module.named_parameters():
        (no_decay if getattr(p, "_no_weight_decay", False) else decay).append(p)
    optim = torch.optim.Adam(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.lr,
    )
    labels = [torch.from_numpy(g.labels) for g in train]
    sizes = [len(g) for g in train]
    ranking_loss = RANKING_LOSSES[config.loss]
    what = f" ({describe_counts(counts)})" if counts else ""
    _emit(
        f"[{name}] training on {sum(sizes)} programs of {len(train)} tasks{what}, "
        f"{len(valid)} validation tasks, device {device}",
        config.verbose,
    )
    best_score = -math.inf
    best_state: dict[str, torch.Tensor] | None = None
    best_epoch = 0
    bad = 0
    history: list[dict[str, float]] = []
    warned = [False]
    epoch = 0
    stopped = False
    path = Path(state_file) if state_file is not None else None
    key = _training_key(module, train, valid, config, name, seed) if path is not None else ""
    saved = _load_state(path, key) if path is not None else None
    if saved is not None:
        module.load_state_dict(saved["module"])
        optim.load_state_dict(saved["optim"])
        rng.bit_generator.state = saved["numpy_rng"]
        torch.set_rng_state(saved["torch_rng"])
        if saved.get("cuda_rng") and device.type == "cuda":
            torch.cuda.set_rng_state_all(saved["cuda_rng"])
        best_score, best_state, best_epoch = saved["best_score"], saved["best_state"], saved["best_epoch"]
        bad, history, epoch, stopped = saved["bad"], saved["history"], saved["epoch"], saved["stopped"]
        _emit(f"[{name}] resuming after epoch {epoch} (state in {path})", config.verbose)
    first, last = epoch + 1, (epoch if stopped else config.epochs)
    for epoch in range(first, last + 1):
        t0 = time.perf_counter()
        module.train()
        total, ranking_total, n_batches = 0.0, 0.0, 0
        for batch in make_batches(sizes, config.batch_size, rng):
            inputs = collate([(train[gi].features, idx) for gi, idx in batch], device)
            y = torch.cat([labels[gi][torch.from_numpy(idx)] for gi, idx in batch]).to(device)
            gid = torch.cat([torch.full((idx.size,), j, dtype=torch.int64) for j, (_gi, idx) in enumerate(batch)])
            scores = module(inputs)
            loss = ranking_loss(scores, y, gid.to(device), sigma=config.sigma)
            ranking_total += float(loss.detach())
            if extra_loss is not None:
                loss = loss + extra_loss(module, scores, batch)
            optim.zero_grad(set_to_none=True)
            if loss.requires_grad:
                loss.backward()
                if config.grad_clip and config.grad_clip > 0:
                    torch.nn.utils.clip_grad_norm_(module.parameters(), config.grad_clip)
                optim.step()
            total += float(loss.detach())
            n_batches += 1
        train_s = time.perf_counter() - t0
        m: dict[str, float] = {
            "train_loss": total / max(n_batches, 1),
            "ranking_loss": ranking_total / max(n_batches, 1),
            "epoch_s": train_s,
        }
        if valid:
            vm = evaluate_groups(module, collate, valid, device, config.batch_size)
            m.update({f"valid_{k}": v for k, v in vm.items()})
            score = m[f"valid_{config.keep_by}"]
            score = -math.inf if math.isnan(score) else score
        else:
            # Without validation data the kept epoch is the one that ranks the training labels best;
            # an extra term (a penalty that starts at zero and grows) must not decide it.
            score = -m["ranking_loss"]
        m["eval_s"] = time.perf_counter() - t0 - train_s
        history.append(m)
        improved = score > best_score + 1e-12
        if improved:
            best_score, best_epoch, bad = score, epoch, 0
            best_state = copy.deepcopy({k: v.detach().clone() for k, v in module.state_dict().items()})
        else:
            bad += 1
        try:
            _call_epoch_hook(name, epoch, m, warned)
        except StopTraining:
            stopped = True
        stopped = stopped or bool(valid and bad >= config.patience)
        if path is not None:
            _save_state(
                path,
                {
                    "key": key,
                    "module": module.state_dict(),
                    "optim": optim.state_dict(),
                    "numpy_rng": rng.bit_generator.state,
                    "torch_rng": torch.get_rng_state(),
                    "cuda_rng": torch.cuda.get_rng_state_all() if device.type == "cuda" else [],
                    "best_score": best_score,
                    "best_state": best_state,
                    "best_epoch": best_epoch,
                    "bad": bad,
                    "history": history,
                    "epoch": epoch,
                    "stopped": stopped,
                },
            )
        line = f"[{name}] epoch {epoch}/{config.epochs} loss {m['train_loss']:.4f}"
        if valid:
            line += f" valid top1 {m['valid_top1']:.4f} top5 {m['valid_top5']:.4f} pairwise {m['valid_pairwise']:.4f}"
        _emit(line + f" {train_s:.2f}s" + (" *" if improved else ""), config.verbose)
        if stopped:
            break
    if best_state is not None:
        module.load_state_dict(best_state)
    module.eval()
    best = history[best_epoch - 1] if best_epoch else (history[-1] if history else {})
    final = {k: v for k, v in best.items() if k.startswith("valid_") or k == "train_loss"}
    final["best_epoch"] = float(best_epoch)
    final["epochs_run"] = float(epoch)
    final["mean_epoch_s"] = float(np.mean([h["epoch_s"] for h in history])) if history else 0.0
    _emit(
        f"[{name}] kept epoch {best_epoch} of {epoch}"
        + (f" (valid {config.keep_by} {best.get(f'valid_{config.keep_by}', math.nan):.4f})" if valid else ""),
        config.verbose,
    )
    return TrainResult(
        metrics=final, best_epoch=best_epoch, epochs_run=epoch, history=history, counts=dict(counts or {})
    )
