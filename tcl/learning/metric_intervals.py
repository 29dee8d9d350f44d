"""How sure a cost-model score is, and what a random pick would score.

A held-out set has a few dozen tasks, so one score (tcl.learning.metrics) moves a lot with which tasks
happen to be in it. :func:`bootstrap_intervals` resamples the tasks with replacement and
reports the percentile interval of each metric; :func:`chance_scores` is the expected score of
ranking every task's programs at random, the line a model must clear to have learned anything.

Both work from per-task terms computed once (Top-k: best latency and the picked one; pairwise:
correct and total pairs), so a thousand resamples cost a few matrix products, not a thousand
evaluations.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from tcl.learning.metrics import _clean, _pair_counts, _top_k_terms

__all__ = ["bootstrap_intervals", "chance_scores"]


def _task_terms(
    latencies: Mapping[str, Any], scores: Mapping[str, Any], ks: Sequence[int], *, with_pairs: bool = True
) -> dict[str, np.ndarray]:
    """Per task (in key order): best latency, each k's picked latency, correct/total pairs
    (``with_pairs=False``: no pairs, which cost time quadratic in a task's programs)."""
    best, picked, correct, pairs = [], {k: [] for k in ks}, [], []
    for key in latencies:
        lat, score = _clean(latencies[key], scores[key])
        terms = [_top_k_terms(lat, score, k) for k in ks]
        best.append(terms[0][0] if terms[0] is not None else np.nan)
        for k, t in zip(ks, terms):
            picked[k].append(t[1] if t is not None else np.nan)
        c, p = _pair_counts(lat, score) if with_pairs else (0.0, 1)
        correct.append(c)
        pairs.append(p)
    out = {"best": np.array(best), "correct": np.array(correct), "pairs": np.array(pairs, dtype=np.float64)}
    out.update({f"picked{k}": np.array(v) for k, v in picked.items()})
    return out


def _pooled_rows(
    counts: np.ndarray, weight: np.ndarray, best: np.ndarray, picked: np.ndarray, member: np.ndarray
) -> np.ndarray:
    """Pooled Top-k of each resample (rows of ``counts``) within each group (columns of the
    0/1 ``member`` matrix): sum w*best / sum w*picked over the tasks drawn; 0 when a drawn
    task's pick failed (infinite latency), NaN for a group with no task drawn."""
    valid = np.isfinite(best)
    failed = (valid & ~np.isfinite(picked)).astype(np.float64)
    w = np.where(valid, weight, 0.0)
    num = counts @ (member * (w * np.nan_to_num(best))[:, None])
    den = counts @ (member * (w * np.where(np.isfinite(picked), picked, 0.0))[:, None])
    drawn = counts @ (member * valid[:, None])
    with np.errstate(invalid="ignore", divide="ignore"):
        score = num / den
    score[(counts @ (member * failed[:, None])) > 0] = 0.0
    score[drawn == 0] = np.nan
    return score


def _metric_rows(
    counts: np.ndarray, terms: dict[str, np.ndarray], weight: np.ndarray, member: np.ndarray | None, ks: Sequence[int]
) -> dict[str, np.ndarray]:
    """Every metric of each resample (one row of task multiplicities per resample)."""
    everything = np.ones((counts.shape[1], 1))
    out = {}
    for k in ks:
        out[f"top{k}"] = _pooled_rows(counts, weight, terms["best"], terms[f"picked{k}"], everything)[:, 0]
        if member is not None:
            with np.errstate(all="ignore"):
                per_net = _pooled_rows(counts, weight, terms["best"], terms[f"picked{k}"], member)
                out[f"top{k}_per_network"] = np.nanmean(per_net, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["pairwise"] = (counts @ terms["correct"]) / (counts @ terms["pairs"])
    return out


def _membership(keys: list[str], networks: Mapping[str, Sequence[str]] | None) -> np.ndarray | None:
    if networks is None:
        return None
    names = sorted({n for k in keys for n in (networks.get(k) or [""])})
    index = {n: i for i, n in enumerate(names)}
    member = np.zeros((len(keys), len(names)))
    for t, key in enumerate(keys):
        for name in networks.get(key) or [""]:
            member[t, index[name]] = 1.0
    return member


def bootstrap_intervals(
    latencies: Mapping[str, Any],
    scores: Mapping[str, Any] | Sequence[Mapping[str, Any]],
    *,
    ks: Sequence[int] = (1, 5),
    weights: Mapping[str, float] | None = None,
    networks: Mapping[str, Sequence[str]] | None = None,
    rounds: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, tuple[float, float]]:
    """``{metric: (low, high)}``: the central ``level`` interval of each metric of
    :func:`tcl.learning.metrics.evaluate` over ``rounds`` resamples of the tasks with replacement.

    ``scores`` may be a list of score mappings (models trained with several seeds): then each
    resample's metric is the mean over them, the interval of the figure reported for the seeds."""
    keys = list(latencies)
    runs = [scores] if isinstance(scores, Mapping) else list(scores)
    weight = np.array([1.0 if weights is None else float(weights.get(k, 1.0)) for k in keys])
    member = _membership(keys, networks)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(keys), size=(rounds, len(keys)))
    counts = np.zeros((rounds, len(keys)))
    np.add.at(counts, (np.arange(rounds)[:, None], draws), 1.0)
    per_run = [_metric_rows(counts, _task_terms(latencies, run, ks), weight, member, ks) for run in runs]
    rows = {name: np.mean([r[name] for r in per_run], axis=0) for name in per_run[0]}
    tail = (1.0 - level) / 2 * 100
    out = {}
    for name, values in rows.items():
        values = values[np.isfinite(values)]
        if values.size:
            low, high = np.percentile(values, [tail, 100 - tail])
            out[name] = (float(low), float(high))
    return out


def chance_scores(
    latencies: Mapping[str, Any],
    *,
    ks: Sequence[int] = (1, 5),
    weights: Mapping[str, float] | None = None,
    networks: Mapping[str, Sequence[str]] | None = None,
    draws: int = 200,
    seed: int = 0,
) -> dict[str, float]:
    """The expected score of random rankings (mean over ``draws`` random score vectors per
    task); pairwise accuracy of a random ranking is 0.5 by definition."""
    keys = list(latencies)
    rng = np.random.default_rng(seed)
    sums: dict[str, float] = {}
    member = _membership(keys, networks)
    weight = np.array([1.0 if weights is None else float(weights.get(k, 1.0)) for k in keys])
    once = np.ones((1, len(keys)))
    for _ in range(draws):
        random_scores = {k: rng.random(np.asarray(latencies[k]).size) for k in keys}
        terms = _task_terms(latencies, random_scores, ks, with_pairs=False)
        for name, value in _metric_rows(once, terms, weight, member, ks).items():
            if name != "pairwise":
                sums[name] = sums.get(name, 0.0) + float(value[0])
    out = {name: total / draws for name, total in sums.items()}
    out["pairwise"] = 0.5
    return out
