"""How different two hardware profiles are to a cost model: over the programs measured on
both, the median per-task Kendall tau of their latencies, and how good the program picked by
one profile's timing is on the other (best latency there / latency of that pick, unweighted
mean over tasks). Prints one JSON line per profile pair.

    python benchmarks/profile_agreement.py --data data/bundled --reference x86-avx2

With ``--against DIR`` it compares each profile of ``--others`` with the same profile's
records in DIR instead: the agreement of a re-measurement (data/README.md, "Idle
re-measurement"); ``--per-task`` adds a line per task.

    python benchmarks/profile_agreement.py --data data/bundled --against data/idle \
        --others x86-avx2,x86-avx512,x86-generic --per-task
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

from tcl.records.database import load_records
from tcl.records.program_keys import program_key


def latencies_by_key(data: Path, profile: str) -> dict[str, dict[str, float]]:
    """task key -> program key -> latency, successful programs only."""
    records = load_records(data, profile=profile)
    return {task.key: {program_key(p.trace): p.latency for p in programs if p.ok} for task, programs in records}


def agreement(
    ref: dict[str, dict[str, float]],
    other: dict[str, dict[str, float]],
    per_task: dict[str, dict[str, float]] | None = None,
) -> dict[str, float]:
    taus, picks = [], []
    for task in sorted(ref.keys() & other.keys()):
        keys = sorted(ref[task].keys() & other[task].keys())
        if len(keys) < 3:
            continue
        a = np.array([ref[task][k] for k in keys])
        b = np.array([other[task][k] for k in keys])
        taus.append(kendalltau(a, b).statistic)
        picks.append(b.min() / b[np.argmin(a)])
        if per_task is not None:
            per_task[task] = {
                "programs": len(keys),
                "kendall_tau": round(float(taus[-1]), 3),
                "pick_by_reference_quality": round(float(picks[-1]), 3),
                "median_ratio": round(float(np.median(b / a)), 3),
            }
    return {
        "tasks": len(taus),
        "median_kendall_tau": round(float(np.median(taus)), 3),
        "pick_by_reference_quality": round(float(np.mean(picks)), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("data/bundled"))
    ap.add_argument("--reference", default="x86-avx2")
    ap.add_argument("--others", default="x86-avx512,x86-generic")
    ap.add_argument(
        "--against",
        type=Path,
        default=None,
        help="compare each of --others with its own records in this directory (a re-measurement)",
    )
    ap.add_argument("--per-task", action="store_true", help="also one line per task")
    args = ap.parse_args()
    for profile in args.others.split(","):
        if args.against is not None:
            ref, other = latencies_by_key(args.data, profile), latencies_by_key(args.against, profile)
            label = {"reference": f"{args.data}:{profile}", "profile": f"{args.against}:{profile}"}
        else:
            ref, other = latencies_by_key(args.data, args.reference), latencies_by_key(args.data, profile)
            label = {"reference": args.reference, "profile": profile}
        rows: dict[str, dict[str, float]] = {}
        print(json.dumps({**label, **agreement(ref, other, rows if args.per_task else None)}))
        names = {task.key: task.name for task, _ in load_records(args.data, profile=profile)} if rows else {}
        for task, row in rows.items():
            print(json.dumps({**label, "task": names.get(task, task), **row}))


if __name__ == "__main__":
    main()
