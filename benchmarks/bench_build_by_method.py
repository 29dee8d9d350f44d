"""Why does tuning with one cost model spend longer building candidates than with another?
One JSON line: for each method directory of a ``tcl tune --compare`` run, the seconds to
rebuild its first ``--records`` measured candidates (one at a time, in tuning's persistent
build worker; the methods take turns in each of ``--repeats`` rounds, so a slow phase of the
machine hits them alike), how often its candidates chose each explicit unroll depth
(MetaSchedule samples 0, 16, 64 or 512 per candidate; deeper unrolling gives LLVM more code to
compile) and the median build seconds of a candidate at each depth. No cost model is loaded:
if the times differ here too, the difference lies in the candidates each model picked, not in
the model running beside the builder. From the records' measured latencies it also says
what the deepest unrolling buys: for how many tasks the best record is 512-deep, and how much
higher the task-weighted estimate (the sum of weight x best latency) would be with only the
records of depth 64 or less.

    python benchmarks/bench_build_by_method.py --runs DIR [--methods xgb,mlp,mamba]

``--runs`` is a ``tcl tune --compare ... --out DIR`` directory. Run it with nothing else on
the machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

UNROLL_DEPTHS = [0, 16, 64, 512]


def unroll_depth(rec) -> int | None:
    """The ``meta_schedule.unroll_explicit`` depth a candidate chose (None: it has no choice)."""
    trace = rec.trace
    for inst in trace.insts:
        if inst.kind.name == "SampleCategorical" and [int(c) for c in inst.attrs[0]] == UNROLL_DEPTHS:
            return UNROLL_DEPTHS[int(trace.decisions[inst])]
    return None


def by_depth(values: dict) -> dict[str, object]:
    """``values`` keyed by unroll depth, shallowest first (no choice first), as JSON keys."""
    return {str(d): values[d] for d in sorted(values, key=lambda d: -1 if d is None else d)}


def latency(rec) -> float | None:
    """The record's fastest repeat in seconds, as the tuning curve counts it; None when it
    did not run."""
    secs = [float(s) for s in (rec.run_secs or [])]
    return min(secs) if secs and all(0 < s < 1e9 for s in secs) else None


def what_512_buys(records: list, depths: list[int | None], weights: dict[str, float]) -> dict[str, object]:
    """Tasks whose best record is 512-deep, and the task-weighted estimate with records of
    depth <= 64 only over the estimate with all records (``depths``: each record's
    :func:`unroll_depth`)."""
    from tcl.records.pools import workload_json

    # one structural hash per workload, not per record: the database shares each workload
    # object among its records, and hashing a module is the slow part of this function
    keys = {workload: workload_json(workload.mod)[0] for workload in {rec.workload for rec in records}}
    best: dict[str, tuple[float, int | None]] = {}
    capped: dict[str, float] = {}
    for rec, depth in zip(records, depths):
        seconds = latency(rec)
        if seconds is None:
            continue
        key = keys[rec.workload]
        best[key] = min(best.get(key, (math.inf, None)), (seconds, depth), key=lambda t: t[0])
        if depth is None or depth <= 64:
            capped[key] = min(capped.get(key, math.inf), seconds)
    full = sum(weights[k] * seconds for k, (seconds, _) in best.items())
    shallow = sum(weights[k] * capped.get(k, math.inf) for k in best)
    return {
        "tasks": len(best),
        "tasks_best_at_512": sum(depth == 512 for _, depth in best.values()),
        "estimate_ratio_without_512": round(shallow / full, 4) if math.isfinite(shallow) else None,
    }


def scheduled(rec) -> tuple:
    """The record's program (its trace replayed on its workload) and its target."""
    from tcl.records.pools import trace_to_schedule

    return trace_to_schedule(rec.workload.mod, rec.trace.as_json()).mod, rec.target


def build_seconds(builder, programs: list) -> list[float]:
    """Seconds to build each ``(module, target)``, one call each."""
    from tvm.s_tir.meta_schedule.builder import BuilderInput

    seconds = []
    for mod, target in programs:
        began = time.perf_counter()
        (result,) = builder.build([BuilderInput(mod, target)])
        seconds.append(time.perf_counter() - began)
        if result.error_msg is not None:
            raise SystemExit(f"a candidate did not build again: {result.error_msg.splitlines()[0]}")
    return seconds


def task_weights(run_dir: Path) -> dict[str, float]:
    """Each task's weight in the network, by workload key, from the run's manifest."""
    manifest = json.loads((run_dir / "tcl_manifest.json").read_text())
    return {t["key"]: float(t["weight"]) for t in manifest["tasks"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", required=True, type=Path)
    parser.add_argument("--methods", default="xgb,mlp,mamba")
    parser.add_argument("--records", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    import tvm.s_tir.meta_schedule as ms

    from tcl.api.measure import FastLocalBuilder

    methods = [m for m in args.methods.split(",") if m]
    records = {m: ms.database.JSONDatabase(work_dir=str(args.runs / m)).get_all_tuning_records() for m in methods}
    depths = {m: [unroll_depth(r) for r in records[m]] for m in methods}
    weights = {m: task_weights(args.runs / m) for m in methods}
    bought = {m: what_512_buys(records[m], depths[m], weights[m]) for m in methods}
    programs = {m: [scheduled(r) for r in records[m][: args.records]] for m in methods}
    builder = FastLocalBuilder()
    build_seconds(builder, programs[methods[0]][:1])  # start the worker before anything is timed
    totals: dict[str, list[float]] = {m: [] for m in methods}
    seconds_at: dict[int | None, list[float]] = {}
    for _ in range(args.repeats):
        for m in methods:
            seconds = build_seconds(builder, programs[m])
            totals[m].append(round(sum(seconds), 2))
            for depth, sec in zip(depths[m], seconds):
                seconds_at.setdefault(depth, []).append(sec)
    builder.close()
    first = methods[0]
    median = {m: statistics.median(totals[m]) for m in methods}
    print(
        json.dumps(
            {
                "runs": str(args.runs),
                "records_built": {m: len(programs[m]) for m in methods},
                "build_s": totals,
                "median_build_s": median,
                f"ratio_to_{first}": {m: round(median[m] / median[first], 3) for m in methods},
                "median_candidate_build_s_by_unroll_depth": by_depth(
                    {d: round(statistics.median(v), 3) for d, v in seconds_at.items()}
                ),
                "candidates_built_by_unroll_depth": by_depth(
                    {d: len(v) // args.repeats for d, v in seconds_at.items()}
                ),
                "unroll_depth_counts": {m: by_depth(Counter(depths[m])) for m in methods},
                "records_counted": {m: len(records[m]) for m in methods},
                "what_512_buys": bought,
            }
        )
    )


if __name__ == "__main__":
    main()
