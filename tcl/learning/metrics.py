"""Cost-model metrics: Top-k score and pairwise ranking accuracy.

Pure numpy. Every function takes, per task, the measured latencies (seconds; a failed or
unmeasured program is ``inf``; NaN is treated as ``inf``) and the predicted scores (higher =
predicted faster), either as two aligned sequences of arrays or as two mappings keyed by task.

Top-k score over tasks t with weights w_t::

    score_k = sum_t w_t * L*_t / sum_t w_t * min_{j in top-k predicted of t} L_{t,j}

``L*_t`` is the best measured latency of t. Tasks with no successful program have no ``L*`` and
are left out. A failed program counts as infinite latency, so a task whose top-k predictions
all failed makes the pooled sum infinite and the score 0: the tuner would have got nothing.

* :func:`top_k_score` pools all tasks into one ratio (what TLP reports);
* :func:`top_k_per_network` computes that ratio per network and averages the networks with
  equal weight (what TenSet reports); a task shared by several networks counts in each.

Ties in predicted scores are broken by program order (the first listed wins), so results
are deterministic.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

__all__ = ["top_k_score", "top_k_per_network", "pairwise_accuracy", "evaluate"]

ArraysLike = Sequence[Any] | Mapping[str, Any]


def _align(latencies: ArraysLike, scores: ArraysLike, *others: Any) -> tuple[list[Any], ...]:
    """Turn mappings (keyed by task) or sequences into aligned lists, plus the keys."""
    if isinstance(latencies, Mapping):
        if not isinstance(scores, Mapping):
            raise TypeError("latencies is a mapping by task, so scores must be one too")
        keys = list(latencies)
        missing = [k for k in keys if k not in scores]
        if missing:
            raise KeyError(f"no scores for task(s) {missing[:3]}")
        lats = [latencies[k] for k in keys]
        scs = [scores[k] for k in keys]
        rest = []
        for other in others:
            if other is None:
                rest.append([None] * len(keys))
            elif isinstance(other, Mapping):
                rest.append([other.get(k) for k in keys])
            else:
                raise TypeError("with mappings of latencies, weights/networks must be mappings too")
        return keys, lats, scs, *rest
    lats, scs = list(latencies), list(scores)
    if len(lats) != len(scs):
        raise ValueError(f"{len(lats)} tasks of latencies but {len(scs)} of scores")
    rest = []
    for other in others:
        if other is None:
            rest.append([None] * len(lats))
        else:
            other = list(other)
            if len(other) != len(lats):
                raise ValueError(f"{len(lats)} tasks but {len(other)} weights/networks")
            rest.append(other)
    return list(range(len(lats))), lats, scs, *rest


def _clean(lat: Any, score: Any) -> tuple[np.ndarray, np.ndarray]:
    lat = np.asarray(lat, dtype=np.float64).reshape(-1)
    score = np.asarray(score, dtype=np.float64).reshape(-1)
    if lat.shape != score.shape:
        raise ValueError(f"a task has {lat.size} latencies but {score.size} scores")
    lat = np.where(np.isfinite(lat) & (lat > 0), lat, np.inf)
    # a NaN score ranks last
    score = np.where(np.isnan(score), -np.inf, score)
    return lat, score


def _top_k_terms(lat: np.ndarray, score: np.ndarray, k: int) -> tuple[float, float] | None:
    """(L*, best latency among the top-k predicted) of one task; None if it has no L*."""
    finite = np.isfinite(lat)
    if not finite.any():
        return None
    order = np.argsort(-score, kind="stable")
    return float(lat[finite].min()), float(lat[order[:k]].min())


def best_and_pick(lat: Any, score: Any) -> tuple[float, float] | None:
    """(best latency, latency of the top-scored program) of one task; None when no program
    of it succeeded. A failed pick is infinitely slow."""
    return _top_k_terms(*_clean(lat, score), 1)


def _pooled(terms: Iterable[tuple[float, float, float]]) -> float:
    num = den = 0.0
    any_task = False
    for w, best, chosen in terms:
        any_task = True
        num += w * best
        den += w * chosen
    if not any_task:
        return math.nan
    if den == 0.0:
        return math.nan
    return num / den if math.isfinite(den) else 0.0


def top_k_score(
    latencies: ArraysLike, scores: ArraysLike, k: int = 1, weights: Sequence[float] | Mapping[str, float] | None = None
) -> float:
    """Pooled Top-k score over all tasks (TLP's definition); NaN when no task has a success."""
    if k < 1:
        raise ValueError("k must be >= 1")
    _keys, lats, scs, ws = _align(latencies, scores, weights)
    terms = []
    for lat, score, w in zip(lats, scs, ws):
        t = _top_k_terms(*_clean(lat, score), k)
        if t is not None:
            terms.append((1.0 if w is None else float(w), *t))
    return _pooled(terms)


def top_k_per_network(
    latencies: ArraysLike,
    scores: ArraysLike,
    k: int = 1,
    networks: Sequence[Sequence[str]] | Mapping[str, Sequence[str]] | None = None,
    weights: Sequence[float] | Mapping[str, float] | None = None,
    network_weights: Mapping[str, Mapping[Any, float]] | None = None,
) -> tuple[float, dict[str, float]]:
    """TenSet's Top-k: the pooled score within each network, averaged over networks.

    ``networks`` gives each task's networks (a task with none is grouped under ``""``).
    ``network_weights[net][task]`` (task = key or index, as the inputs are keyed), when given,
    overrides the task weight inside that network (multiplicity of the subgraph there).
    Returns ``(mean over networks, {network: score})``; networks whose score is NaN (no
    successful task) are left out of the mean.
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    keys, lats, scs, ws, nets = _align(latencies, scores, weights, networks)
    per: dict[str, list[tuple[float, float, float]]] = {}
    for key, lat, score, w, net in zip(keys, lats, scs, ws, nets):
        t = _top_k_terms(*_clean(lat, score), k)
        if t is None:
            continue
        names = tuple(net) if net else ("",)
        for name in names:
            weight = 1.0 if w is None else float(w)
            if network_weights is not None and key in network_weights.get(name, {}):
                weight = float(network_weights[name][key])
            per.setdefault(name, []).append((weight, *t))
    by_net = {name: _pooled(terms) for name, terms in sorted(per.items())}
    valid = [v for v in by_net.values() if not math.isnan(v)]
    return (float(np.mean(valid)) if valid else math.nan), by_net


def _pair_counts(lat: np.ndarray, score: np.ndarray, block: int = 2048) -> tuple[float, int]:
    """(correct pairs, pairs) of one task; pairs of equal latency (incl. two failures) are
    excluded; a pair with equal predicted scores counts half."""
    n = lat.size
    correct = 0.0
    pairs = 0
    for start in range(0, n, block):
        li, si = lat[start : start + block, None], score[start : start + block, None]
        faster = li < lat[None, :]  # i truly faster than j: each unordered pair counted once
        with np.errstate(invalid="ignore"):
            right = (si > score[None, :]) & faster
            tie = (si == score[None, :]) & faster
        pairs += int(faster.sum())
        correct += float(right.sum()) + 0.5 * float(tie.sum())
    return correct, pairs


def pairwise_accuracy(latencies: ArraysLike, scores: ArraysLike) -> float:
    """Fraction of correctly ordered program pairs within tasks, over all tasks' pairs.

    A pair is correct when the faster program has the higher score; pairs of equal latency
    are excluded, equal scores count half. NaN when there is no pair.
    """
    _keys, lats, scs = _align(latencies, scores)
    correct, pairs = 0.0, 0
    for lat, score in zip(lats, scs):
        c, p = _pair_counts(*_clean(lat, score))
        correct += c
        pairs += p
    return correct / pairs if pairs else math.nan


def evaluate(
    latencies: ArraysLike,
    scores: ArraysLike,
    *,
    ks: Sequence[int] = (1, 5),
    weights: Sequence[float] | Mapping[str, float] | None = None,
    networks: Sequence[Sequence[str]] | Mapping[str, Sequence[str]] | None = None,
) -> dict[str, float]:
    """All metrics in one dict: ``top{k}`` (pooled), ``top{k}_per_network`` (when
    ``networks`` is given) and ``pairwise``."""
    out: dict[str, float] = {}
    for k in ks:
        out[f"top{k}"] = top_k_score(latencies, scores, k, weights)
        if networks is not None:
            out[f"top{k}_per_network"] = top_k_per_network(latencies, scores, k, networks, weights)[0]
    out["pairwise"] = pairwise_accuracy(latencies, scores)
    return out
