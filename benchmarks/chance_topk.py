"""Top-1/Top-5 and pairwise accuracy of a *random* ranking on held-out networks: the floor a
cost model must beat to mean anything (on our 200-program tasks of the vector profiles a random
pick is 8-20x slower than the best, so chance Top-1 is far below the 0.25 one might guess). Averages
``--draws`` random score vectors per task. Prints one JSON line per profile.

    python benchmarks/chance_topk.py --data data/bundled --held-out bert-tiny,resnet-18
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from tcl.learning.metrics import pairwise_accuracy, top_k_score
from tcl.learning.transfer import load_platform


def chance(held, draws: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    lats = {task.key: np.array([p.latency for p in programs]) for task, programs in held if len(programs) > 1}
    weights = {task.key: task.weight for task, _ in held}
    figures = {"top1": [], "top5": [], "pairwise": []}
    for _ in range(draws):
        scores = {k: rng.random(len(v)) for k, v in lats.items()}
        figures["top1"].append(top_k_score(lats, scores, 1, weights))
        figures["top5"].append(top_k_score(lats, scores, 5, weights))
        figures["pairwise"].append(pairwise_accuracy(lats, scores))
    return {"tasks": len(lats), **{k: round(float(np.mean(v)), 4) for k, v in figures.items()}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("data/bundled"))
    ap.add_argument("--profiles", default="x86-avx2,x86-avx512,x86-generic")
    ap.add_argument("--held-out", default="bert-tiny,resnet-18")
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    for profile in args.profiles.split(","):
        networks = args.held_out.split(",")
        _, held = load_platform(args.data, profile, networks)
        print(
            json.dumps(
                {"profile": profile, "held_out": networks, "ranking": "random", **chance(held, args.draws, args.seed)}
            )
        )


if __name__ == "__main__":
    main()
