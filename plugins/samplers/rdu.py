"""TCL's RDU active-learning sampler: Representativeness + Diversity + Uncertainty.

One plugin, ``rdu``, with weights ``w_r``, ``w_d``, ``w_u`` (defaults 1, 1, 1). A zero weight turns
its criterion off, so the single-criterion and pair ablations (R, D, U, RD, RU, DU) are
configurations of this one sampler; ``rdu-r``, ``rdu-d`` and ``rdu-u`` are registered as
convenience names for the single-criterion ones. Rounds (select → measure → retrain → select)
are run by the caller, which passes the programs measured so far as ``measured``.

Per call (one task's pool):

1. Embed the pool: ``model.embed`` when a model is given, else the ``trace-seq`` features
   flattened; then standardise each column (z-score; constant columns left at 0).
2. Duplicates (byte-identical embeddings) are grouped. The first unmeasured member of each group
   that has no measured member is a *fresh* candidate; every other unmeasured program is only
   taken after all fresh ones (its diversity is 0 anyway).
3. R: k-means (``KMeans`` for small pools, ``MiniBatchKMeans`` above ``minibatch_above``
   candidates; ``n_init`` small, seeded) over the fresh candidates with ``n_clusters`` clusters
   (default: the budget, capped at ``max_clusters``); R = 1 - distance to the own centroid /
   largest such distance in that cluster.
4. U: ``model.uncertainty`` (MC-dropout std for the torch models); a model without one
   (NotImplementedError), or no model, gives U = 0 with one logged warning per sampler.
5. Each term is min-max normalised to [0, 1]; combined = w_r·R + w_d·D + w_u·U; greedy selection
   where D is the distance to the nearest measured or already chosen program (greedy k-center),
   re-normalised over the remaining candidates after every pick and updated incrementally
   (one matrix-vector product per pick). Without any measured program the first pick breaks
   score ties by closeness to the pool mean.
6. Big problems (candidates × budget > ``exact_limit``) are chosen in batches: each round
   shortlists the ``shortlist``·b best candidates by the current score, picks b of them greedily
   (D updated within the shortlist), then updates D for everyone with one matrix product. With
   b = 1 this is the exact greedy.

Deterministic for a given ``seed``. Ties go to the lowest pool index.
"""

from __future__ import annotations

import functools
import logging
import math
from typing import Any, Sequence

import numpy as np

from tcl.api.interfaces import CostModel, Featurizer, Sampler
from tcl.api.programs import Program, Task
from tcl_plugins.samplers.measured import measured_mask

log = logging.getLogger(__name__)

_EPS = 1e-12


def _minmax(x: np.ndarray) -> np.ndarray:
    if x.size == 0:
        return x.astype(np.float64)
    lo, hi = float(np.min(x)), float(np.max(x))
    if not math.isfinite(lo) or not math.isfinite(hi) or hi - lo <= _EPS:
        return np.zeros(x.shape, dtype=np.float64)
    return (x - lo) / (hi - lo)


def standardize(emb: np.ndarray) -> np.ndarray:
    """Column z-scores as float32; constant columns become 0."""
    x = np.asarray(emb, dtype=np.float64)
    mu = x.mean(axis=0)
    sd = x.std(axis=0)
    sd[sd <= _EPS] = 1.0
    return ((x - mu) / sd).astype(np.float32)


def duplicate_groups(emb: np.ndarray) -> np.ndarray:
    """Group id per row; rows with byte-identical embeddings share an id."""
    x = np.ascontiguousarray(emb)
    if x.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    x = x + 0.0  # -0.0 → 0.0 so equal values compare equal bytewise
    rows = np.ascontiguousarray(x).view(np.dtype((np.void, x.dtype.itemsize * x.shape[1]))).ravel()
    _, inverse = np.unique(rows, return_inverse=True)
    return inverse.ravel()


def representativeness(
    x: np.ndarray, fit_rows: np.ndarray, n_clusters: int, seed: int, minibatch_above: int = 5000, n_init: int = 1
) -> np.ndarray:
    """R for every row of ``x``: 1 - distance to its k-means centroid / the cluster's largest."""
    from sklearn.cluster import KMeans, MiniBatchKMeans

    fit_x = x[fit_rows]
    k = max(1, min(int(n_clusters), fit_x.shape[0]))
    if k == 1:
        centers = fit_x.mean(axis=0, keepdims=True)
    elif fit_x.shape[0] > minibatch_above:
        km = MiniBatchKMeans(
            n_clusters=k,
            n_init=n_init,
            random_state=seed,
            batch_size=4096,
            max_iter=20,
            init_size=min(fit_x.shape[0], max(3 * k, 4096)),
        )
        centers = km.fit(fit_x).cluster_centers_
    else:
        km = KMeans(n_clusters=k, n_init=n_init, random_state=seed, max_iter=100)
        centers = km.fit(fit_x).cluster_centers_
    centers = centers.astype(np.float32)
    # Nearest centroid of every row, in chunks (n × k distances).
    n = x.shape[0]
    labels = np.empty(n, dtype=np.int64)
    dist2 = np.empty(n, dtype=np.float64)
    c2 = (centers * centers).sum(axis=1)
    step = max(1, 2**24 // max(1, k))
    for s in range(0, n, step):
        blk = x[s : s + step]
        d2 = (blk * blk).sum(axis=1)[:, None] + c2[None, :] - 2.0 * (blk @ centers.T)
        lab = np.argmin(d2, axis=1)
        labels[s : s + step] = lab
        dist2[s : s + step] = np.maximum(d2[np.arange(blk.shape[0]), lab], 0.0)
    dist = np.sqrt(dist2)
    cmax = np.zeros(k, dtype=np.float64)
    np.maximum.at(cmax, labels, dist)
    denom = cmax[labels]
    return np.where(denom > _EPS, 1.0 - dist / np.where(denom > _EPS, denom, 1.0), 1.0)


def _update_dmin2(dmin2: np.ndarray, x: np.ndarray, sq: np.ndarray, picks: np.ndarray) -> None:
    """dmin2 = min(dmin2, squared distance to any of ``picks``), in place (matrix product)."""
    p = x[picks]
    psq = sq[picks]
    step = max(1, 2**23 // max(1, len(picks)))
    for s in range(0, x.shape[0], step):
        d2 = sq[s : s + step, None] + psq[None, :] - 2.0 * (x[s : s + step] @ p.T)
        np.minimum(dmin2[s : s + step], np.maximum(d2.min(axis=1), 0.0), out=dmin2[s : s + step])


def greedy_select(
    x: np.ndarray,
    base: np.ndarray,
    take: int,
    *,
    w_d: float = 1.0,
    anchors: np.ndarray | None = None,
    exact_limit: float = 2e7,
    rounds: int = 100,
    shortlist: int = 8,
) -> np.ndarray:
    """Greedy k-center-with-scores over candidate rows ``x`` (float32, standardised).

    ``base``: the R/U part of the score per candidate; ``anchors``: embeddings of programs that
    already count as chosen (measured). Returns ``take`` row positions in pick order.
    """
    n = x.shape[0]
    take = min(int(take), n)
    if take <= 0:
        return np.zeros(0, dtype=np.int64)
    base = np.asarray(base, dtype=np.float64)
    if w_d == 0:
        return np.argsort(-base, kind="stable")[:take]
    sq = (x * x).sum(axis=1).astype(np.float32)
    dmin2 = np.full(n, np.inf, dtype=np.float64)
    if anchors is not None and len(anchors):
        a = np.asarray(anchors, dtype=np.float32)
        asq = (a * a).sum(axis=1)
        step = max(1, 2**23 // max(1, a.shape[0]))
        for s in range(0, n, step):
            d2 = sq[s : s + step, None] + asq[None, :] - 2.0 * (x[s : s + step] @ a.T)
            dmin2[s : s + step] = np.maximum(d2.min(axis=1), 0.0)
    central = None
    if not np.isfinite(dmin2).any():  # nothing measured: first pick ties broken by centrality
        mu = x.mean(axis=0)
        central = -((x - mu) ** 2).sum(axis=1)
    alive = np.ones(n, dtype=bool)
    chosen: list[int] = []

    def pick(score: np.ndarray, rows: np.ndarray | None) -> int:
        """Index into ``score`` (optionally restricted to ``rows``) of the best candidate."""
        nonlocal central
        j = int(np.argmax(score))
        if central is not None:
            ties = np.flatnonzero(score >= score[j] - 1e-9)
            c = central[ties] if rows is None else central[rows[ties]]
            j = int(ties[np.argmax(c)])
            central = None
        return j

    def d_norm(d2: np.ndarray, lo: float, hi: float) -> np.ndarray:
        if not np.isfinite(hi) or hi - lo <= _EPS:
            return np.zeros(d2.shape, dtype=np.float64)
        return np.clip((np.sqrt(d2) - lo) / (hi - lo), 0.0, 1.0)

    def bounds() -> tuple[float, float]:
        d = np.sqrt(dmin2[alive])
        return float(d.min()), float(d.max())

    if n * take <= exact_limit:
        for _ in range(take):
            lo, hi = bounds()
            score = base + w_d * d_norm(dmin2, lo, hi)
            score[~alive] = -np.inf
            j = pick(score, None)
            chosen.append(j)
            alive[j] = False
            d2 = sq + sq[j] - 2.0 * (x @ x[j])
            np.minimum(dmin2, np.maximum(d2, 0.0), out=dmin2)
        return np.asarray(chosen, dtype=np.int64)

    b = max(1, math.ceil(take / max(1, rounds)))
    while len(chosen) < take:
        bb = min(b, take - len(chosen))
        lo, hi = bounds()
        score = base + w_d * d_norm(dmin2, lo, hi)
        score[~alive] = -np.inf
        m = min(int(alive.sum()), shortlist * bb)
        short = np.argpartition(-score, m - 1)[:m]
        short = short[np.lexsort((short, -score[short]))]  # best first, ties by index
        xs, sqs = x[short], sq[short]
        local = dmin2[short].copy()
        ok = np.ones(m, dtype=bool)
        picks = []
        for _ in range(bb):
            s = base[short] + w_d * d_norm(local, lo, hi)
            s[~ok] = -np.inf
            j = pick(s, short)
            picks.append(short[j])
            ok[j] = False
            d2 = sqs + sqs[j] - 2.0 * (xs @ xs[j])
            np.minimum(local, np.maximum(d2, 0.0), out=local)
        picks_a = np.asarray(picks, dtype=np.int64)
        chosen.extend(picks)
        alive[picks_a] = False
        _update_dmin2(dmin2, x, sq, picks_a)
    return np.asarray(chosen, dtype=np.int64)


def _flatten_features(features: Any, n: int) -> np.ndarray:
    if isinstance(features, np.ndarray):
        return features.reshape(n, -1).astype(np.float64)
    # Per-program arrays of varying length (e.g. per-store rows): mean over rows.
    rows = [np.asarray(f, dtype=np.float64).reshape(-1, np.asarray(f).shape[-1]).mean(axis=0) for f in features]
    return np.stack(rows) if rows else np.zeros((0, 1))


class RDUSampler(Sampler):
    """Representativeness + Diversity + Uncertainty (module doc). All options keyword."""

    name = "rdu"

    def __init__(
        self,
        *,
        w_r: float = 1.0,
        w_d: float = 1.0,
        w_u: float = 1.0,
        n_clusters: int | None = None,
        max_clusters: int = 512,
        featurizer: str | Featurizer = "trace-seq",
        minibatch_above: int = 5000,
        kmeans_n_init: int = 1,
        exact_limit: float = 2e7,
        batch_rounds: int = 100,
        shortlist: int = 8,
    ):
        for key, w in (("w_r", w_r), ("w_d", w_d), ("w_u", w_u)):
            if not (isinstance(w, (int, float)) and math.isfinite(w) and w >= 0):
                raise ValueError(f"rdu: {key} must be a finite number >= 0, got {w!r}")
        if n_clusters is not None and int(n_clusters) < 1:
            raise ValueError(f"rdu: n_clusters must be >= 1, got {n_clusters}")
        self.w_r, self.w_d, self.w_u = float(w_r), float(w_d), float(w_u)
        self.n_clusters = None if n_clusters is None else int(n_clusters)
        self.max_clusters = int(max_clusters)
        self._featurizer_spec = featurizer
        self._featurizer: Featurizer | None = featurizer if not isinstance(featurizer, str) else None
        self.minibatch_above = int(minibatch_above)
        self.kmeans_n_init = int(kmeans_n_init)
        self.exact_limit = float(exact_limit)
        self.batch_rounds = int(batch_rounds)
        self.shortlist = int(shortlist)
        self._warned_u = False

    # -- inputs
    def _fallback_featurizer(self) -> Featurizer:
        if self._featurizer is None:
            name = self._featurizer_spec
            if name == "trace-seq":
                from tcl_plugins.featurizers.trace_seq import TraceSeqFeaturizer

                self._featurizer = TraceSeqFeaturizer()
            else:
                from tcl.api.discovery import registry

                self._featurizer = registry().create("featurizers", name)
        return self._featurizer

    def embed(self, task: Task, pool: Sequence[Program], model: CostModel | None) -> np.ndarray:
        if model is not None:
            try:
                emb = np.asarray(model.embed(task, list(pool)), dtype=np.float64).reshape(len(pool), -1)
                return emb
            except NotImplementedError:
                log.warning(
                    "rdu: cost model %s gives no embedding; using %s features",
                    getattr(model, "name", "?"),
                    self._featurizer_spec,
                )
        feats = self._fallback_featurizer().featurize(task, list(pool))
        return _flatten_features(feats, len(pool))

    def _uncertainty(self, task: Task, programs: Sequence[Program], model: CostModel | None) -> np.ndarray | None:
        if model is None:
            if not self._warned_u:
                log.warning("rdu: w_u=%g but no cost model was given; the uncertainty term is 0", self.w_u)
                self._warned_u = True
            return None
        try:
            u = np.asarray(model.uncertainty(task, list(programs)), dtype=np.float64).reshape(-1)
        except NotImplementedError:
            if not self._warned_u:
                log.warning(
                    "rdu: cost model %s gives no uncertainty; the uncertainty term is 0", getattr(model, "name", "?")
                )
                self._warned_u = True
            return None
        return np.nan_to_num(u, nan=0.0, posinf=0.0, neginf=0.0)

    # -- Sampler
    def select(
        self,
        task: Task,
        pool: Sequence[Program],
        budget: int,
        *,
        measured: Sequence[int] = (),
        model: CostModel | None = None,
        seed: int = 0,
    ) -> list[int]:
        n = len(pool)
        taken = measured_mask(n, measured)
        free = np.flatnonzero(~taken)
        take = min(max(int(budget), 0), free.size)
        if take == 0:
            return []
        if take >= free.size:
            return free.tolist()
        emb = self.embed(task, pool, model)
        unc = None
        if self.w_u > 0:
            unc = self._uncertainty(task, [pool[i] for i in free], model)
        return self.select_embedded(emb, take, taken, uncertainty=unc, seed=seed)

    def select_embedded(
        self,
        emb: np.ndarray,
        take: int,
        measured_mask: np.ndarray,
        *,
        uncertainty: np.ndarray | None = None,
        seed: int = 0,
    ) -> list[int]:
        """The selection on a precomputed ``(n, d)`` pool embedding (``uncertainty``: one per
        unmeasured program, in index order, or None). Used by :meth:`select` and the benchmark."""
        n = emb.shape[0]
        free = np.flatnonzero(~measured_mask)
        take = min(max(int(take), 0), free.size)
        if take == 0:
            return []
        if take >= free.size:
            return free.tolist()
        groups = duplicate_groups(emb)
        x = standardize(emb)
        # Fresh candidates: first unmeasured member of each group with no measured member.
        dirty = np.zeros(int(groups.max()) + 1, dtype=bool)
        dirty[groups[measured_mask]] = True
        first = np.full(dirty.size, n, dtype=np.int64)
        np.minimum.at(first, groups[free], free)
        fresh_mask = np.zeros(n, dtype=bool)
        ok_groups = np.flatnonzero(~dirty & (first < n))
        fresh_mask[first[ok_groups]] = True
        pos = np.full(n, -1, dtype=np.int64)
        pos[free] = np.arange(free.size)
        fresh = np.flatnonzero(fresh_mask)  # pool indices, sorted
        rest = free[~fresh_mask[free]]
        # Base score (R and U parts) for every unmeasured program, in ``free`` order.
        base = np.zeros(free.size, dtype=np.float64)
        if self.w_r > 0 and fresh.size:
            k = self.n_clusters if self.n_clusters is not None else min(take, self.max_clusters)
            r = representativeness(x[free], pos[fresh], k, seed, self.minibatch_above, self.kmeans_n_init)
            base += self.w_r * _minmax(r)
        if self.w_u > 0 and uncertainty is not None:
            base += self.w_u * _minmax(np.asarray(uncertainty, dtype=np.float64))
        out: list[int] = []
        n_fresh = min(take, fresh.size)
        if n_fresh:
            order = greedy_select(
                x[fresh],
                base[pos[fresh]],
                n_fresh,
                w_d=self.w_d,
                anchors=x[measured_mask],
                exact_limit=self.exact_limit,
                rounds=self.batch_rounds,
                shortlist=self.shortlist,
            )
            out.extend(fresh[order].tolist())
        if len(out) < take:  # duplicates of chosen/measured programs: D = 0, rank by R/U
            order = np.argsort(-base[pos[rest]], kind="stable")[: take - len(out)]
            out.extend(rest[order].tolist())
        return sorted(out)


#: The single-criterion ablations, registered as ``rdu-r``, ``rdu-d`` and ``rdu-u``: name -> (w_r, w_d, w_u)
VARIANTS = {"rdu-r": (1.0, 0.0, 0.0), "rdu-d": (0.0, 1.0, 0.0), "rdu-u": (0.0, 0.0, 1.0)}
rdu_r, rdu_d, rdu_u = (functools.partial(RDUSampler, w_r=r, w_d=d, w_u=u) for r, d, u in VARIANTS.values())
