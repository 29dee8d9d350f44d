"""Which uncertainty should RDU's U term use: MC-dropout of one model, or the spread of an
ensemble? Both are measured on the same situation the sampler is in after its first round: a
Mamba trained on a random 5% of each training task's programs, asked about the other 95%.

A useful uncertainty is high where the model ranks a program wrongly, so the figure of merit
is the Spearman correlation, within each task, between a program's uncertainty and its rank
error (|predicted rank - true rank| / programs), averaged over tasks. Beside it: the seconds
each costs (MC-dropout: the extra forward passes; ensemble: training and running the extra
models). Prints one JSON line per profile.

    python benchmarks/bench_uncertainty.py --profiles x86-avx2,x86-avx512,x86-generic
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from scipy.stats import rankdata, spearmanr

from tcl.api import discovery
from tcl.api.programs import ProgramSet
from tcl.learning.record_sets import split_by_network
from tcl.records.database import load_records
from tcl.records.feature_cache import default_cache_dir


def first_round(train: ProgramSet, fraction: float, seed: int) -> tuple[ProgramSet, ProgramSet]:
    """(a random ``fraction`` of each task's programs, the rest), as RDU's round 1 leaves them."""
    rng = np.random.default_rng(seed)
    chosen, rest = ProgramSet(profile=train.profile), ProgramSet(profile=train.profile)
    for task, programs in train:
        order = rng.permutation(len(programs))
        take = max(2, int(round(fraction * len(programs))))
        chosen.add(task, [programs[i] for i in order[:take]])
        rest.add(task, [programs[i] for i in order[take:]])
    return chosen, rest


def rank_error(scores: np.ndarray, latencies: np.ndarray) -> np.ndarray:
    """|rank by score - rank by speed| / n per program (0 = placed exactly right)."""
    return np.abs(rankdata(-scores) - rankdata(latencies)) / len(scores)


def zscore(x: np.ndarray) -> np.ndarray:
    return (x - x.mean()) / (x.std() or 1.0)


def mean_correlation(pairs: list[tuple[np.ndarray, np.ndarray]]) -> float:
    """Mean over tasks of Spearman(uncertainty, error); tasks where either is constant skipped."""
    values = [spearmanr(u, e).statistic for u, e in pairs if np.ptp(u) > 0 and np.ptp(e) > 0]
    return float(np.mean(values)) if values else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("data/idle"))
    ap.add_argument("--profiles", default="x86-avx2,x86-avx512,x86-generic")
    ap.add_argument("--held-out", default="bert-tiny")
    ap.add_argument("--fraction", type=float, default=0.05, help="share of each task measured in round 1")
    ap.add_argument("--members", type=int, default=4, help="ensemble size (seeds 0..members-1)")
    ap.add_argument("--passes", type=int, default=4, help="MC-dropout passes (the sampling configs use 4)")
    ap.add_argument("--epochs", type=int, default=10)
    args = ap.parse_args()
    registry = discovery.registry()
    options = {
        "verbose": False,
        "cache_dir": str(default_cache_dir()),
        "epochs": args.epochs,
        "batch_size": 128,
        "layers": 1,
        "expand": 1,
        "mc_passes": args.passes,
        "threads": 1,
    }  # as configs/sampling-ablation.toml
    for profile in args.profiles.split(","):
        train, _ = split_by_network(load_records(args.data, profile=profile).measured(), args.held_out.split(","))
        chosen, rest = first_round(train, args.fraction, seed=0)
        models, fit_s = [], []
        for seed in range(args.members):
            model = registry.create("cost_models", "mamba", **options)
            start = time.perf_counter()
            model.fit(chosen, None, seed=seed)
            fit_s.append(time.perf_counter() - start)
            models.append(model)

        mc_pairs, ens_pairs, mc_s, ens_predict_s = [], [], 0.0, 0.0
        for task, programs in rest:
            latencies = np.array([p.latency for p in programs])
            start = time.perf_counter()
            scores = [models[0].predict(task, programs)]
            single_predict_s = time.perf_counter() - start
            start = time.perf_counter()
            mc = models[0].uncertainty(task, programs, passes=args.passes)
            mc_s += time.perf_counter() - start
            start = time.perf_counter()
            scores += [m.predict(task, programs) for m in models[1:]]
            ens_predict_s += single_predict_s + time.perf_counter() - start
            standard = np.stack([zscore(s) for s in scores])  # members' scores differ in scale
            mc_pairs.append((mc, rank_error(scores[0], latencies)))
            ens_pairs.append((standard.std(axis=0), rank_error(standard.mean(axis=0), latencies)))

        print(
            json.dumps(
                {
                    "profile": profile,
                    "tasks": len(rest.tasks),
                    "round1_programs": len(chosen),
                    "pool_programs": len(rest),
                    "passes": args.passes,
                    "members": args.members,
                    "mc_dropout_corr": round(mean_correlation(mc_pairs), 4),
                    "ensemble_corr": round(mean_correlation(ens_pairs), 4),
                    "mc_dropout_s": round(mc_s, 2),
                    "ensemble_extra_s": round(sum(fit_s[1:]) + ens_predict_s, 2),
                    "fit_s_per_model": round(float(np.median(fit_s)), 2),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
