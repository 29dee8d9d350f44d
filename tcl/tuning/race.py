"""Racing each task's best few records inside the compiled network.

Every candidate is timed alone, in a hot loop; inside the network its inputs come from the
kernel before it and its caches hold that kernel's data, and schedules differ in how much
that costs them. The record fastest alone is then not always the fastest in place. A race
compiles the network once per rank r < k with each task's r-th best record, times every
function inside the running networks (Relax VM instrumentation; the compiles take turns, in
blocks), keeps for each task the record whose functions took least, and keeps the network
built from those picks only when it beats the one built from the best records end to end.
"""

from __future__ import annotations

import collections
import time
from typing import Any, Mapping

import numpy as np

from tcl.tuning.build import compile_prepared
from tcl.tuning.timing import function_seconds, in_turns, network_seconds

#: Timed network runs per compile; bert-tiny takes about a millisecond a run.
RACE_RUNS = 50
#: Blocks the runs are split into, the compiles taking turns in each.
RACE_BLOCKS = 5


def race_records(
    mod: Any,
    target: Any,
    database: Any,
    inputs: list[Any],
    k: int,
    *,
    chosen: Mapping[str, Any] | None = None,
    use_default: set[str] | frozenset[str] = frozenset(),
    runs: int = RACE_RUNS,
    compiled: Any = None,
) -> tuple[Any, dict[str, Any], tuple[Any, dict[str, list[str]]] | None]:
    """Race the ``k`` best records of every task of ``database`` inside the network ``mod``
    (prepared as for tuning; ``chosen`` and ``use_default`` as in
    :func:`tcl.tuning.compile.compile_and_check`, the same in every compile) and return the
    database to compile with (``database`` itself when racing did not pay), what happened and,
    when the picks are kept, their network as :func:`~tcl.tuning.build.compile_prepared` built
    it (so it is not built again). ``compiled``: a VM of the network already built from
    ``database``, to save compiling it again."""
    import tvm
    import tvm.s_tir.meta_schedule as ms
    import tvm_ffi
    from tvm import relax
    from tvm.s_tir.meta_schedule.tune_context import _normalize_mod

    start = time.perf_counter()
    device = tvm.cpu()
    tops: dict[int, list[Any]] = {}  # workload (structural hash) -> its best records, fastest first
    functions_of: dict[int, list[str]] = collections.defaultdict(list)
    for gv, func in mod.functions_items():
        if not isinstance(func, tvm.tirx.PrimFunc) or gv.name_hint in use_default:
            continue
        best = database.query_tuning_record(_normalize_mod(func), target, gv.name_hint)
        if best is None:
            continue
        key = tvm_ffi.structural_hash(best.workload.mod)
        functions_of[key].append(gv.name_hint)
        if key not in tops:
            tops[key] = [r for r in database.get_top_k(best.workload, k) if r.run_secs]
    rounds = max((len(records) for records in tops.values()), default=0)

    def database_of(rank_of: Mapping[int, int]) -> Any:
        picked = ms.database.MemoryDatabase()
        for key, records in tops.items():
            record = records[min(rank_of.get(key, 0), len(records) - 1)]
            workload = picked.commit_workload(record.workload.mod)
            picked.commit_tuning_record(
                ms.database.TuningRecord(record.trace, workload, record.run_secs, record.target, record.args_info)
            )
        return picked

    def build(picked: Any) -> tuple[tuple[Any, dict[str, list[str]]], Any]:
        """The network compiled with ``picked``, as compile_prepared returns it, and its VM."""
        built = compile_prepared(mod, target, picked, chosen or {}, use_default)
        return built, relax.VirtualMachine(built[0], device)

    vms = [
        compiled if rank == 0 and compiled is not None else build(database_of({key: rank for key in tops}))[1]
        for rank in range(rounds)
    ]
    networks = {"best_records": vms[0]} if vms else {}
    # by workload and rank, the median seconds per run of each block; the ranks take turns in
    # every block, so a phase of the machine (docs/tuning.md) falls on all of them alike
    blocks: dict[int, list[list[float]]] = {key: [[] for _ in records] for key, records in tops.items()}
    per_block = max(1, runs // RACE_BLOCKS)
    for _ in range(RACE_BLOCKS):
        for rank, vm in enumerate(vms):
            per_function, _, _ = function_seconds(vm, inputs, per_block)
            for key, names in functions_of.items():
                if rank < len(tops[key]):
                    per_run = np.sum([per_function.get(name, [0.0] * per_block) for name in names], axis=0)
                    blocks[key][rank].append(float(np.median(per_run)))
    seconds = {key: [float(np.median(times)) for times in by_rank] for key, by_rank in blocks.items()}
    rank_of = {key: int(np.argmin(times)) for key, times in seconds.items()}
    changed = sum(rank > 0 for rank in rank_of.values())
    report: dict[str, Any] = {
        "k": k,
        "tasks": len(tops),
        "changed_tasks": changed,
        "by_task": [
            {"functions": sorted(functions_of[key]), "seconds_by_rank": times, "pick": rank_of[key]}
            for key, times in seconds.items()
        ],
    }
    if not changed:
        report.update(kept=False, race_s=time.perf_counter() - start)
        return database, report, None
    raced = database_of(rank_of)
    built, networks["raced"] = build(raced)
    totals = in_turns(
        {name: lambda vm=vm: network_seconds(vm, device, inputs, 10) for name, vm in networks.items()},
        RACE_BLOCKS,
    )
    best_s, raced_s = totals["best_records"], totals["raced"]
    kept = raced_s < best_s
    report.update(
        best_records_s=best_s,
        raced_s=raced_s,
        kept=kept,
        race_s=time.perf_counter() - start,
    )
    return (raced, report, built) if kept else (database, report, None)
