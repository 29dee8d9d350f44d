"""Tuning methods side by side on one network and profile (:func:`tcl.tuning.compare.compare`), as one
JSON line: time and trials to reach the first method's best estimated latency, final
end-to-end latency at equal trials, and each against torch eager.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_tune_compare.py --network bert-tiny --profile native \\
        --methods xgb,CKPT_MLP,CKPT_MAMBA --trials 96 --out /tmp/compare [--population 128]

Outputs stay in ``--out`` (records per method, compare.json, compare.png); a rerun continues them.
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--network", default="bert-tiny")
    parser.add_argument("--profile", default="native")
    parser.add_argument("--methods", required=True, help="comma-separated, the first is the baseline")
    parser.add_argument("--trials", type=int, default=96)
    parser.add_argument("--trials-per-round", type=int, default=None)
    parser.add_argument("--population", type=int, default=512)
    parser.add_argument("--online", action="store_true")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    import torch

    from tcl.tuning.compare import compare

    torch.set_num_threads(1)
    summary = compare(
        args.methods.split(","),
        args.network,
        args.profile,
        args.trials,
        args.out,
        online=args.online,
        trials_per_round=args.trials_per_round,
        population=args.population,
    )
    print(json.dumps({"bench": "tune_compare", "population": args.population, **summary}))


if __name__ == "__main__":
    main()
