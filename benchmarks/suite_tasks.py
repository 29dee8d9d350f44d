"""Tuning tasks of the built-in network suite: per network, distinct across the suite
(deduplicated by workload key), and per part of a split file.

    python benchmarks/suite_tasks.py --profile x86-avx2 --split data/split.toml --out suite.json

Prints one line per network (seconds to extract, tasks) and a JSON summary; ``--out`` also
writes every task (network, key, name, weight, flops). Extraction is what ``tcl collect``
does first (include_simple_tasks False: tasks without a reduction are left out). ``--pool N``
also generates a candidate pool of N for every distinct task (what ``tcl collect`` does
next) and counts the tasks whose pool failed or came back smaller.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from tcl.api import discovery
from tcl.api.profiles import get_profile
from tcl.measurement.tasks import extract_tasks
from tcl.records.splits import load_split


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="x86-avx2", help="hardware profile whose target the tasks are for")
    parser.add_argument("--networks", default="", help="comma-separated networks (default: every registered one)")
    parser.add_argument("--split", type=Path, default=None, help="split file: also count the tasks of each part")
    parser.add_argument("--out", type=Path, default=None, help="write every task here as JSON")
    parser.add_argument("--pool", type=int, default=0, help="also generate a pool of this size per distinct task")
    args = parser.parse_args()

    registry = discovery.registry()
    names = [n for n in args.networks.split(",") if n] or sorted(registry.names("networks"))
    target = get_profile(args.profile).tvm_target()
    tasks: dict[str, list[dict]] = {}
    pools = {"tasks": 0, "failed": [], "short": [], "seconds": 0.0}
    for name in names:
        start = time.perf_counter()
        extracted = extract_tasks(registry.create("networks", name), target)
        tasks[name] = [{"key": t.key, "name": t.name, "weight": t.weight, "flops": t.flops} for t in extracted]
        print(f"{name}: {len(extracted)} tasks in {time.perf_counter() - start:.1f} s", flush=True)
        if args.pool:
            _try_pools(name, extracted, target, args.pool, pools)
    keys = {n: {t["key"] for t in ts} for n, ts in tasks.items()}
    summary = {
        "profile": args.profile,
        "networks": len(tasks),
        "tasks": sum(len(t) for t in tasks.values()),
        "distinct_tasks": len(set().union(*keys.values())),
    }
    if args.split is not None:
        split = load_split(args.split)
        summary["split"] = {
            part: {"networks": len(getattr(split, part)), "distinct_tasks": len(k)}
            for part, k in split.assign_tasks(keys).items()
        }
        summary["split"]["not_in_split"] = sorted(set(tasks) - set(split.networks))
    if args.pool:
        summary["pools"] = {"size": args.pool, **pools, "seconds": round(pools["seconds"], 1)}
    print(json.dumps(summary))
    if args.out is not None:
        args.out.write_text(json.dumps({"summary": summary, "tasks": tasks}, indent=1) + "\n", encoding="utf-8")


_POOLED: set[str] = set()


def _try_pools(network: str, extracted: list, target: object, size: int, pools: dict) -> None:
    """Generate a pool for each task not pooled yet; note failures and short pools."""
    from tcl.measurement.candidates import generate_pool_with_stats

    for task in extracted:
        if task.key in _POOLED:
            continue
        _POOLED.add(task.key)
        pools["tasks"] += 1
        try:
            found, stats = generate_pool_with_stats(task.mod, target, size, seed=0)
        except Exception as exc:  # report every failing task, not just the first
            pools["failed"].append(f"{network}/{task.name}: {type(exc).__name__}: {exc}"[:300])
            continue
        pools["seconds"] += stats.seconds
        if len(found) < size:
            pools["short"].append(f"{network}/{task.name}: {len(found)}")


if __name__ == "__main__":
    main()
