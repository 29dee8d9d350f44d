"""Reading records and pools with Python's cycle collector paused (as shipped) and running.
One JSON line: seconds of ``load_records`` on ``--data`` (one profile) and of ``load_pool`` on
``--pool``, both ways, taking turns in ``--rounds`` rounds, medians and their ratios; and the
milliseconds a program key (``program_key``: canonical JSON and sha256) takes per program.

    python benchmarks/bench_load_records.py --data data/bundled --pool plugins/networks/pool

``--heap`` first loads torch and keeps a copy of the records alive, as a training run does:
the collector's full passes walk everything alive, so a larger heap slows the running side more.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("data/bundled"))
    parser.add_argument("--profile", default="x86-avx2")
    parser.add_argument("--pool", type=Path, default=Path("plugins/networks/pool"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--heap", action="store_true")
    args = parser.parse_args()

    from tcl.records import database, pools
    from tcl.records.database import load_records
    from tcl.records.pools import load_pool
    from tcl.records.program_keys import program_key

    first = load_records(args.data, profile=args.profile)
    traces = [p.trace for _, progs in first for p in progs]
    start = time.perf_counter()
    for trace in traces:
        program_key(trace)
    key_ms = (time.perf_counter() - start) * 1e3 / len(traces)
    if args.heap:
        import torch  # noqa: F401  (its modules are part of a training run's heap)
    else:
        del first, traces

    def timed(load: Callable[[], Any], paused: bool) -> float:
        saved = database.gc_paused, pools.gc_paused
        if not paused:
            database.gc_paused = pools.gc_paused = contextlib.nullcontext
        try:
            start = time.perf_counter()
            load()
            return time.perf_counter() - start
        finally:
            database.gc_paused, pools.gc_paused = saved

    loads = {
        "records": lambda: load_records(args.data, profile=args.profile),
        "pool": lambda: load_pool(args.pool),
    }
    times: dict[str, list[float]] = {f"{name}_{way}": [] for name in loads for way in ("paused", "running")}
    for _ in range(args.rounds):
        for name, load in loads.items():
            for way in ("paused", "running"):
                times[f"{name}_{way}"].append(timed(load, way == "paused"))
    medians = {key: round(float(np.median(values)), 3) for key, values in times.items()}
    result: dict[str, Any] = {"bench": "load_records", "data": str(args.data), "pool": str(args.pool)}
    result.update(heap=args.heap, rounds=args.rounds, programs=len(traces), program_key_ms=round(key_ms, 3))
    result.update({f"{key}_s": value for key, value in medians.items()})
    for name in loads:
        result[f"{name}_speedup"] = round(medians[f"{name}_running"] / medians[f"{name}_paused"], 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
