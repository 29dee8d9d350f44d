"""``tcl eval`` reading features from the feature cache (as shipped) against ``--no-feature-cache``.
One JSON line: wall seconds of the whole command both ways, taking turns in ``--rounds`` rounds
(the cache, a fresh temporary one, is filled by one run before them), medians and their ratio.

    python benchmarks/bench_eval_cache.py --model plugins/pretrained/x86-avx2/mlp --data data/bundled

The mlp and xgb read per-store features (a trace replay per program): what the cache saves.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=Path("plugins/pretrained/x86-avx2/mlp"))
    parser.add_argument("--data", type=Path, default=Path("data/bundled"))
    parser.add_argument("--profile", default="x86-avx2")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TCL_CACHE_DIR": cache}
        command = [sys.executable, "-m", "tcl.cli.main", "eval", "--model", str(args.model), "--data", str(args.data)]
        command += ["--profile", args.profile, "--json"]

        def timed(*extra: str) -> tuple[float, dict]:
            start = time.perf_counter()
            out = subprocess.run([*command, *extra], env=env, capture_output=True, text=True, check=True).stdout
            return time.perf_counter() - start, json.loads(out)

        fill_s, reference = timed()
        times: dict[str, list[float]] = {"cached": [], "uncached": []}
        for _ in range(args.rounds):
            for way, extra in (("cached", ()), ("uncached", ("--no-feature-cache",))):
                seconds, result = timed(*extra)
                if result["pairwise"] != reference["pairwise"]:
                    raise SystemExit(f"{way} run scored pairwise {result['pairwise']}, not {reference['pairwise']}")
                times[way].append(seconds)
    medians = {way: round(float(np.median(values)), 2) for way, values in times.items()}
    print(
        json.dumps(
            {
                "bench": "eval_cache",
                "model": str(args.model),
                "data": str(args.data),
                "profile": args.profile,
                "programs": reference["programs"],
                "rounds": args.rounds,
                "fill_s": round(fill_s, 2),
                "cached_s": medians["cached"],
                "uncached_s": medians["uncached"],
                "speedup": round(medians["uncached"] / medians["cached"], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
