"""Programs measured per second on a fixed mix of six tasks: three ways, side by side.

The mix: conv2d 3x3 (1x64x28x28), depthwise conv2d 3x3 (1x128x28x28), dense (128x512x512),
batch matmul (12x128x64x128), layer norm (128x768) and an add+relu fusion (1x256x28x28).
Each task gets ``--programs`` candidates from tcl's pool generator (fixed seed; the fusion's
design space holds only a few distinct programs, which are then repeated). Sides, in
``--order``:

* ``engine``: the ``local`` backend's ``measure()`` (tcl.measurement.local_engine: build on every core,
  then time alone), what ``tcl collect`` uses; ``engine@N`` the same with N candidates per
  library (default 4);
* ``metaschedule``: the same backend's MetaSchedule builder and ``LocalRunner``
  (tcl.api.measure.measure_with), what ``measure()`` did before the engine;
* ``tune_tir``: plain ``ms.tune_tir`` with TVM's defaults (``builder="local"``,
  ``runner="local"``, XGB model), ``--programs`` trials per task; its time includes its search.
  Its ``ok`` counts the programs that built and ran: on a busy 2-core machine TVM's default
  builder can time out on every candidate (``--tune-tir-build-timeout`` raises its limit).

Both tcl sides use the profile's ``[measure]`` settings and batches of ``--batch``. Prints
progress on stderr and one JSON line on stdout with programs/s per side, the ratios to
``metaschedule``, and the cores other processes used meanwhile (``other_cores_max``).

    python benchmarks/bench_collection_throughput.py --profile x86-avx2 --programs 32
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
    print(f"[throughput] {msg}", file=sys.stderr, flush=True)


def workloads() -> dict[str, object]:
    import tvm
    from tvm import te, topi

    def module(tensors):
        return tvm.IRModule({"main": te.create_prim_func(tensors).with_attr("global_symbol", "main")})

    def conv():
        x, w = te.placeholder((1, 64, 28, 28), name="x"), te.placeholder((64, 64, 3, 3), name="w")
        return module([x, w, topi.nn.conv2d_nchw(x, w, 1, 1, 1)])

    def depthwise():
        x, w = te.placeholder((1, 128, 28, 28), name="x"), te.placeholder((128, 1, 3, 3), name="w")
        return module([x, w, topi.nn.depthwise_conv2d_nchw(x, w, 1, 1, 1)])

    def dense():
        x, w = te.placeholder((128, 512), name="x"), te.placeholder((512, 512), name="w")
        k = te.reduce_axis((0, 512), name="k")
        return module([x, w, te.compute((128, 512), lambda i, j: te.sum(x[i, k] * w[j, k], axis=k), name="y")])

    def batch_matmul():
        a, b = te.placeholder((12, 128, 64), name="a"), te.placeholder((12, 64, 128), name="b")
        k = te.reduce_axis((0, 64), name="k")
        return module(
            [a, b, te.compute((12, 128, 128), lambda n, i, j: te.sum(a[n, i, k] * b[n, k, j], axis=k), name="c")]
        )

    def layer_norm():
        x, g, b = (
            te.placeholder((128, 768), name="x"),
            te.placeholder((768,), name="g"),
            te.placeholder((768,), name="b"),
        )
        return module([x, g, b, topi.nn.layer_norm(x, g, b, axis=[1])])

    def add_relu():
        x, y = te.placeholder((1, 256, 28, 28), name="x"), te.placeholder((1, 256, 28, 28), name="y")
        return module([x, y, topi.nn.relu(topi.add(x, y))])

    return {f.__name__: f() for f in (conv, depthwise, dense, batch_matmul, layer_norm, add_relu)}


def candidates(mods: dict, target, programs: int) -> dict[str, list]:
    from tcl.measurement.candidates import generate_pool

    out = {}
    for name, mod in mods.items():
        pool = generate_pool(mod, target, programs, seed=0)
        out[name] = (pool * programs)[:programs]  # a small design space repeats its programs
        log(f"{name}: {len(pool)} distinct candidates")
    return out


def run_tcl(measure, mods: dict, pools: dict, batch: int) -> dict:
    from tcl.measurement.machine_load import OtherLoad

    load, worst, done, ok = OtherLoad(), 0.0, 0, 0
    start = time.perf_counter()
    for name, mod in mods.items():
        for lo in range(0, len(pools[name]), batch):
            results = measure(mod, pools[name][lo : lo + batch])
            done += len(results)
            ok += sum(r.ok for r in results)
            worst = max(worst, load.sample() or 0.0)
    wall = time.perf_counter() - start
    return {
        "wall_s": round(wall, 1),
        "programs": done,
        "ok": ok,
        "programs_per_s": round(done / wall, 3),
        "other_cores_max": round(worst, 2),
    }


def run_tune_tir(mods: dict, target, programs: int, batch: int, build_timeout_s: float | None) -> dict:
    from tvm.s_tir import meta_schedule as ms

    from tcl.measurement.machine_load import OtherLoad

    load, done, ok = OtherLoad(), 0, 0
    start = time.perf_counter()
    for mod in mods.values():
        with tempfile.TemporaryDirectory(prefix="tcl-bench-") as work_dir, contextlib.redirect_stdout(sys.stderr):
            builder = "local" if build_timeout_s is None else ms.builder.LocalBuilder(timeout_sec=build_timeout_s)
            db = ms.tune_tir(
                mod,
                target,
                work_dir,
                max_trials_global=programs,
                num_trials_per_iter=batch,
                builder=builder,
                runner="local",
                cost_model="xgb",
                seed=0,
            )
            records = db.get_all_tuning_records()
            done += len(records)
            ok += sum(1 for r in records if r.run_secs and all(float(s) < 1e9 for s in r.run_secs))
    wall = time.perf_counter() - start
    return {
        "wall_s": round(wall, 1),
        "programs": done,
        "ok": ok,
        "programs_per_s": round(done / wall, 3),
        "other_cores_max": round(load.sample() or 0.0, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default="x86-avx2")
    parser.add_argument("--programs", type=int, default=32, help="programs per task")
    parser.add_argument("--batch", type=int, default=16, help="programs per measure() call / tune_tir iteration")
    parser.add_argument("--order", default="engine,metaschedule,tune_tir", help="sides, comma-separated")
    parser.add_argument(
        "--tune-tir-build-timeout",
        type=float,
        help="tune_tir side: LocalBuilder timeout in seconds (default: TVM's, 30 s)",
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

    import attrs
    import tvm
    import tvm.s_tir.tensor_intrin  # noqa: F401 - any tuning process pays this once: keep it out of the timings

    from tcl.api.measure import measure_with
    from tcl.api.profiles import get_profile
    from tcl_plugins.backends.local import LocalBackend

    profile = get_profile(args.profile)
    target = tvm.target.Target(profile.target)
    mods = workloads()
    pools = candidates(mods, target, args.programs)
    out: dict = {
        "bench": "collection_throughput",
        "profile": args.profile,
        "programs_per_task": args.programs,
        "batch": args.batch,
        "tasks": list(mods),
    }
    for side in args.order.split(","):
        log(f"side {side}")
        if side == "tune_tir":
            out[side] = run_tune_tir(mods, target, args.programs, args.batch, args.tune_tir_build_timeout)
        else:
            options = dict(profile.backend_options)
            if side.startswith("engine@"):  # engine@N: the engine with N candidates per library
                options["group_size"] = int(side.split("@")[1])
            backend = LocalBackend(attrs.evolve(profile, backend_options=options))
            if side.startswith("engine"):
                measure = backend.measure
            else:

                def measure(mod, schedules, backend=backend):
                    return measure_with(backend.builder(), backend.runner(), backend.target(), mod, schedules)

            try:
                measure(mods["add_relu"], pools["add_relu"][:1])  # start the workers outside the timing
                out[side] = run_tcl(measure, mods, pools, args.batch)
                if side.startswith("engine"):
                    out[side]["phase_s"] = {k: round(v, 1) for k, v in backend.phase_seconds().items()}
            finally:
                backend.close()
        log(f"{side}: {out[side]}")
    base = out.get("metaschedule", {}).get("programs_per_s")
    if base:
        out["ratio_to_metaschedule"] = {
            s: round(out[s]["programs_per_s"] / base, 2) for s in out if s.startswith(("engine", "tune_tir"))
        }
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
