"""Seconds for the RDU sampler to choose 10% of a 100,000-program pool (synthetic 64-d
embeddings, no cost model): once as one big pool, once as 1000 tasks x 100 programs with one
call per task. Prints one JSON line.

    python benchmarks/bench_rdu_selection.py [--n 100000] [--dim 64] [--tasks 1000] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from tcl_plugins.samplers.rdu import RDUSampler


def synthetic(n: int, dim: int, rng: np.random.Generator, blobs: int = 50) -> np.ndarray:
    centers = rng.normal(scale=4.0, size=(blobs, dim))
    return (centers[rng.integers(0, blobs, size=n)] + rng.normal(size=(n, dim))).astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    emb = synthetic(args.n, args.dim, rng)
    unc = rng.random(args.n)  # stands in for model.uncertainty (its own cost is the model's)
    sampler = RDUSampler()
    take = args.n // 10

    t = time.perf_counter()
    big = sampler.select_embedded(emb, take, np.zeros(args.n, dtype=bool), uncertainty=unc, seed=args.seed)
    big_s = time.perf_counter() - t

    per = args.n // args.tasks
    t = time.perf_counter()
    total = 0
    for i in range(args.tasks):
        sl = slice(i * per, (i + 1) * per)
        total += len(
            sampler.select_embedded(emb[sl], per // 10, np.zeros(per, dtype=bool), uncertainty=unc[sl], seed=args.seed)
        )
    tasks_s = time.perf_counter() - t
    print(
        json.dumps(
            {
                "bench": "rdu_selection",
                "pool": args.n,
                "dim": args.dim,
                "budget": take,
                "one_pool_s": round(big_s, 2),
                "one_pool_selected": len(big),
                "tasks": args.tasks,
                "programs_per_task": per,
                "per_task_total_s": round(tasks_s, 2),
                "per_task_selected": total,
                "weights": [sampler.w_r, sampler.w_d, sampler.w_u],
            }
        )
    )


if __name__ == "__main__":
    main()
