"""Pool generation with and without a guiding model: seconds, and how the model scores the
random half against the second half (unguided mutation, or evolutionary search).

    python benchmarks/bench_pool_origins.py --network resnet-50 --size 128 \
        --model plugins/pretrained/x86-avx2/mamba

The task is the network's first conv2d task (most work first). Scores are the model's own
(higher = predicted faster), so this shows where the search went, not measured speed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from tcl.api import discovery
from tcl.api.profiles import get_profile
from tcl.learning.evaluation import load_checkpoint
from tcl.measurement.candidates import generate_pool_with_stats, schedule_scorer
from tcl.measurement.tasks import extract_tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", default="resnet-50")
    parser.add_argument("--profile", default="x86-avx2")
    parser.add_argument("--size", type=int, default=128, help="pool size; half of it from random sampling")
    parser.add_argument("--model", type=Path, required=True, help="checkpoint guiding the evolutionary search")
    args = parser.parse_args()

    target = get_profile(args.profile).tvm_target()
    tasks = extract_tasks(discovery.registry().create("networks", args.network), target)
    task = next(t for t in tasks if "conv2d" in t.name)
    model = load_checkpoint(args.model)
    half = args.size // 2
    for guide in (None, model):
        pool, stats = generate_pool_with_stats(task.mod, target, args.size, seed=0, max_random=half, model=guide)
        scores = np.array(schedule_scorer(model, task.mod)(pool))
        print(
            json.dumps(
                {
                    "task": task.name,
                    "guided": guide is not None,
                    "seconds": round(stats.seconds, 1),
                    "origins": {o: stats.origins.count(o) for o in sorted(set(stats.origins))},
                    "median_score_random": round(float(np.median(scores[:half])), 3),
                    "median_score_rest": round(float(np.median(scores[half:])), 3),
                }
            )
        )


if __name__ == "__main__":
    main()
