"""How different two hardware profiles are to a cost model: over the programs measured on
both, the median per-task Kendall tau of their latencies, and how good the program picked by
one profile's timing is on the other (best latency there / latency of that pick, unweighted
mean over tasks). Prints one JSON line per profile pair.

    python benchmarks/profile_agreement.py --data data/bundled --reference x86-avx2
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

from tcl.database import load_records
from tcl.pools import program_key


def latencies_by_key(data: Path, profile: str) -> dict[str, dict[str, float]]:
    """task key -> program key -> latency, successful programs only."""
    records = load_records(data, profile=profile)
    return {task.key: {program_key(p.trace): p.latency for p in programs if p.ok} for task, programs in records}


def agreement(ref: dict[str, dict[str, float]], other: dict[str, dict[str, float]]) -> dict[str, float]:
    taus, picks = [], []
    for task in ref.keys() & other.keys():
        keys = sorted(ref[task].keys() & other[task].keys())
        if len(keys) < 3:
            continue
        a = np.array([ref[task][k] for k in keys])
        b = np.array([other[task][k] for k in keys])
        taus.append(kendalltau(a, b).statistic)
        picks.append(b.min() / b[np.argmin(a)])
    return {"tasks": len(taus), "median_kendall_tau": round(float(np.median(taus)), 3),
            "pick_by_reference_quality": round(float(np.mean(picks)), 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("data/bundled"))
    ap.add_argument("--reference", default="x86-avx2")
    ap.add_argument("--others", default="x86-avx512,x86-generic")
    args = ap.parse_args()
    ref = latencies_by_key(args.data, args.reference)
    for profile in args.others.split(","):
        print(json.dumps({"reference": args.reference, "profile": profile,
                          **agreement(ref, latencies_by_key(args.data, profile))}))


if __name__ == "__main__":
    main()
