"""Predictions per second through the MetaSchedule bridge (featurization included) for our
models (trace-seq ``tlp``/``mamba``, per-store ``mlp``) next to TVM's own XGBoost model, on
one population of MetaSchedule candidates: what ``EvolutionarySearch`` asks for many times
per tuning round. Prints one JSON line.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_bridge_predict.py --checkpoint CKPT [--checkpoint CKPT ...]
        [--data data/bundled/x86-avx2] [--candidates 512] [--repeat 3]

XGB is first trained (TVM's ``update``) on the task's measured records in ``--data``, so
its predict runs a real booster; its time includes TVM's C++ PerStoreFeature extraction.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", action="append", default=[], help="checkpoint directory (repeatable)")
    parser.add_argument("--data", default="data/bundled/x86-avx2", help="measured records of the profile")
    parser.add_argument("--profile", default="x86-avx2")
    parser.add_argument("--candidates", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--extract-threads",
        type=int,
        default=os.cpu_count() or 1,
        help="TVM feature-extraction threads for XGB (our per-store featurizer uses the physical cores)",
    )
    args = parser.parse_args()

    import numpy as np
    import torch
    import tvm.s_tir.meta_schedule as ms
    from tvm.s_tir.meta_schedule.runner import RunnerResult

    from tcl.api.profiles import get_profile
    from tcl.learning.evaluation import load_checkpoint
    from tcl.measurement.candidates import generate_pool, tune_context
    from tcl.records.database import load_records
    from tcl.records.pools import trace_to_schedule
    from tcl.tuning.bridge import BridgeState

    torch.set_num_threads(1)
    target = get_profile(args.profile).tvm_target()
    records = load_records(args.data)
    task, measured = max(((t, [p for p in progs if p.ok]) for t, progs in records), key=lambda tp: len(tp[1]))
    context = tune_context(task.module(), target, num_threads=args.extract_threads)  # as tuning gives XGB
    arg_info = ms.arg_info.ArgInfo.from_prim_func(context.mod["main"])
    candidates = [ms.MeasureCandidate(s, arg_info) for s in generate_pool(context.mod, target, args.candidates)]

    def rate(predict) -> dict:
        predict()  # warm-up: caches, lazy imports
        best = min(_timed(predict) for _ in range(args.repeat))
        return {"predicts_per_s": round(len(candidates) / best, 1), "ms_per_call": round(best * 1e3, 2)}

    results = {"trace_json_ms_per_trace": _trace_json_times(candidates)}
    xgb = ms.cost_model.CostModel.create("xgb", num_tuning_cores=1)
    train = [ms.MeasureCandidate(trace_to_schedule(context.mod, p.trace), arg_info) for p in measured]
    xgb.update(context, train, [RunnerResult(list(p.run_secs), None) for p in measured])
    results["tvm-xgb"] = {"featurizer": "per-store (TVM C++)", **rate(lambda: xgb.predict(context, candidates))}
    for path in args.checkpoint:
        model = load_checkpoint(path, verbose=False, threads=1)
        state = BridgeState(model)
        scores = state.predict(context, candidates)
        assert scores.shape == (len(candidates),) and scores.dtype == np.float64
        results[f"{model.name} ({path})"] = {
            "featurizer": model.featurizer.name,
            **rate(lambda state=state: state.predict(context, candidates)),
        }
    print(
        json.dumps(
            {
                "bench": "bridge_predict",
                "task": task.name,
                "candidates": len(candidates),
                "trained_xgb_on": len(measured),
                "torch_threads": 1,
                "extract_threads": args.extract_threads,
                "results": results,
            }
        )
    )


def _trace_json_times(candidates) -> dict:
    """Trace JSON of the population, TVM's ``as_json`` route against the memoized one
    (from an empty memo, then warm), side by side; checks they agree."""
    from tcl.records.trace_json import TraceJson, plain_json

    traces = [c.sch.trace for c in candidates]
    reference = [plain_json(t.as_json(remove_postproc=False)) for t in traces]
    as_json_s = _timed(lambda: [plain_json(t.as_json(remove_postproc=False)) for t in traces])
    convert = TraceJson()
    cold_s = _timed(lambda: [convert(t) for t in traces])
    warm_s = _timed(lambda: [convert(t) for t in traces])
    assert [convert(t) for t in traces] == reference
    per = 1e3 / len(traces)
    return {
        "as_json": round(as_json_s * per, 3),
        "memo_cold": round(cold_s * per, 3),
        "memo_warm": round(warm_s * per, 3),
        "memo_lines": len(convert.lines),
    }


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
