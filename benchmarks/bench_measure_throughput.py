"""Measured programs per second: tcl's ``local`` backend vs MetaSchedule's default builder/runner.

Both sides run the same ``ms.tune_tir`` (same task, target, trial budget, batch size, cost
model, seed) in one process, one after the other; only ``builder=``/``runner=`` differ:

* ``tcl``: the ``local`` backend of a hardware profile (persistent build worker using
  ``tcl.api.measure.fast_build``, LocalRunner with the profile's EvaluatorConfig and threads);
* ``default``: ``builder="local"``, ``runner="local"``, i.e. what a TVM user gets.

Each side's time includes creating its builder and runner. ``tvm.s_tir.tensor_intrin`` is
imported before either side is timed (TuneContext imports it in the tuning process anyway).
With ``--build-only`` it also times three builders on the same candidates, two batches each:
TVM's LocalBuilder, LocalBuilder(f_build=fast_build) and tcl's FastLocalBuilder.

``programs_per_s`` counts every trial tune_tir finished (its database keeps failed ones too),
``valid_per_s`` only those that got a run time; ``ratio``/``ratio_valid`` are tcl / default.
Run it on a quiet machine: under heavy load TVM's default builder can spend its whole 30 s
build timeout importing ``tvm.s_tir.tensor_intrin`` and fail every build.

Prints progress on stderr and one JSON line on stdout, e.g.

    python benchmarks/bench_measure_throughput.py --trials 64 --size 512
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def matmul(n: int):
    import tvm
    from tvm import te

    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return tvm.IRModule({"main": te.create_prim_func([a, b, c]).with_attr("global_symbol", "main")})


def tune(mod, target, trials: int, per_iter: int, cost_model: str, seed: int, builder, runner) -> dict:
    from tvm.s_tir import meta_schedule as ms

    with tempfile.TemporaryDirectory(prefix="tcl-bench-") as work_dir:
        start = time.perf_counter()
        builder = builder() if callable(builder) and not isinstance(builder, str) else builder
        runner = runner() if callable(runner) and not isinstance(runner, str) else runner
        with contextlib.redirect_stdout(sys.stderr):  # MetaSchedule logs to stdout: keep it for the JSON
            db = ms.tune_tir(
                mod,
                target,
                work_dir,
                max_trials_global=trials,
                num_trials_per_iter=per_iter,
                builder=builder,
                runner=runner,
                cost_model=cost_model,
                seed=seed,
            )
        wall = time.perf_counter() - start
        records = db.get_all_tuning_records()
        secs = [float(r.run_secs[0]) for r in records if r.run_secs and float(r.run_secs[0]) < 1e9]
        candidates = [r.as_measure_candidate().sch for r in records]
    return {
        "wall_s": wall,
        "measured": len(records),
        "ok": len(secs),
        "best_ms": min(secs) * 1e3 if secs else None,
        "candidates": candidates,
    }


def bench_builders(target, candidates: list, batches: int = 2) -> dict:
    from tvm.s_tir import meta_schedule as ms

    from tcl.api.measure import FastLocalBuilder, fast_build

    inputs = [ms.builder.BuilderInput(sch.mod, target) for sch in candidates]
    makers = {
        "tvm_local_builder": lambda: ms.builder.LocalBuilder(),
        "tvm_local_builder_fast_build": lambda: ms.builder.LocalBuilder(f_build=fast_build),
        "tcl_fast_local_builder": lambda: FastLocalBuilder(max_workers=1),
    }
    out = {}
    for name, make in makers.items():
        start = time.perf_counter()
        builder = make()
        ok = 0
        for _ in range(batches):
            for res in builder.build(inputs):
                ok += res.error_msg is None
        wall = time.perf_counter() - start
        if hasattr(builder, "close"):
            builder.close()
        out[name] = {
            "wall_s": round(wall, 2),
            "built": ok,
            "per_build_s": round(wall / max(1, batches * len(inputs)), 3),
        }
        log(f"builder {name}: {out[name]}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default="x86-avx2")
    parser.add_argument("--size", type=int, default=512, help="matmul size n (n x n x n)")
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--per-iter", type=int, default=32, help="num_trials_per_iter (batch size)")
    parser.add_argument("--cost-model", default="xgb")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--order", choices=["tcl-first", "default-first"], default="tcl-first")
    parser.add_argument(
        "--default-build-timeout",
        type=float,
        default=None,
        help='give the default side LocalBuilder(timeout_sec=...) instead of builder="local" (30 s)',
    )
    parser.add_argument("--build-only", action="store_true", help="also time the three builders on 16 candidates")
    args = parser.parse_args(argv)

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    t0 = time.perf_counter()
    import tvm
    import tvm.s_tir.tensor_intrin  # noqa: F401 - paid once by any tuning process; keep it out of both timings
    from tvm.s_tir import meta_schedule as ms

    from tcl.api.profiles import get_profile
    from tcl_plugins.backends.local import LocalBackend

    log(f"imports {time.perf_counter() - t0:.1f}s")
    profile = get_profile(args.profile)
    target = tvm.target.Target(profile.target)
    mod = matmul(args.size)
    backend_holder: list = []

    def tcl_builder():
        backend_holder.append(LocalBackend(profile))
        return backend_holder[-1].builder()

    def tcl_runner():
        return backend_holder[-1].runner()

    sides = {
        "tcl": (tcl_builder, tcl_runner),
        "default": (
            "local"
            if args.default_build_timeout is None
            else (lambda: ms.builder.LocalBuilder(timeout_sec=args.default_build_timeout)),
            "local",
        ),
    }
    order = ["tcl", "default"] if args.order == "tcl-first" else ["default", "tcl"]
    results = {}
    for side in order:
        log(f"tuning with {side} builder/runner: {args.trials} trials of matmul {args.size}^3 on {args.profile}")
        builder, runner = sides[side]
        results[side] = tune(mod, target, args.trials, args.per_iter, args.cost_model, args.seed, builder, runner)
        if side == "tcl":
            backend_holder[-1].close()
        log(f"{side}: {results[side]['measured']} programs in {results[side]['wall_s']:.1f}s")

    out = {
        "task": f"matmul{args.size}",
        "profile": args.profile,
        "trials": args.trials,
        "num_trials_per_iter": args.per_iter,
        "cost_model": args.cost_model,
        "order": args.order,
        "default_build_timeout_s": args.default_build_timeout or 30.0,
    }
    for side in ("tcl", "default"):
        r = results[side]
        out[side] = {
            "programs_per_s": round(r["measured"] / r["wall_s"], 3),  # trials done (records), ok or not
            "valid_per_s": round(r["ok"] / r["wall_s"], 3),  # trials that produced a run time
            "wall_s": round(r["wall_s"], 1),
            "measured": r["measured"],
            "ok": r["ok"],
            "best_ms": None if r["best_ms"] is None else round(r["best_ms"], 3),
        }
    out["ratio"] = round(out["tcl"]["programs_per_s"] / out["default"]["programs_per_s"], 2)
    out["ratio_valid"] = (
        round(out["tcl"]["valid_per_s"] / out["default"]["valid_per_s"], 2) if out["default"]["valid_per_s"] else None
    )
    if args.build_only:
        out["builders"] = bench_builders(target, results["tcl"]["candidates"][:16])
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
