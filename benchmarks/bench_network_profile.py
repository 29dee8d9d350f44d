"""Where a compiled network's time goes, as one JSON line: its end-to-end latency; each compiled
function's time inside the network (Relax VM instrumentation) beside its time alone in a hot
loop on random inputs. End to end minus the kernels alone is what running them inside the
network costs: cold caches between kernels and the VM's own work (allocations, calls).

    python benchmarks/bench_network_profile.py --network bert-tiny --records DIR [--profile native]

``--records`` is a tuning record directory (what ``tcl tune --out DIR`` wrote there); the
network is compiled from it as ``tcl tune`` compiles it, without a model's picks for untuned
tasks (those get default schedules). The instrumentation's Python callbacks cost a few
microseconds per call, which the in-network times include (``instrumented_run_ms`` against
``end_to_end_ms`` shows how much). Run it with nothing else on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _random_args(func, device):
    import numpy as np
    import tvm
    import tvm.s_tir.meta_schedule as ms

    rng = np.random.default_rng(0)
    args = []
    for info in ms.arg_info.ArgInfo.from_prim_func(func):
        shape, dtype = [int(s) for s in info.shape], str(info.dtype)
        value = rng.random(shape).astype(dtype) if "float" in dtype else np.zeros(shape, dtype)
        args.append(tvm.runtime.tensor(value, device))
    return args


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--network", default="bert-tiny")
    parser.add_argument("--records", required=True, type=Path)
    parser.add_argument("--profile", default="native")
    parser.add_argument("--runs", type=int, default=50, help="network runs under instrumentation")
    args = parser.parse_args()

    import numpy as np
    import tvm
    from tvm import relax

    from tcl.api.measure import set_tvm_threads
    from tcl.api.profiles import get_profile
    from tcl.measurement.networks import resolve_network
    from tcl.tuning.build import compile_network
    from tcl.tuning.timing import function_seconds, median_call_s, network_seconds

    profile = get_profile(args.profile)
    threads = set_tvm_threads(int(profile.runtime_threads))
    _, definition = resolve_network(args.network)
    executable, functions, mod = compile_network(definition, profile.tvm_target(), args.records)
    device = tvm.cpu()
    vm = relax.VirtualMachine(executable, device)
    inputs = [tvm.runtime.tensor(x.numpy(), device) for x in definition.example_inputs]
    end_to_end = network_seconds(vm, device, inputs, 20)
    per_run, calls, instrumented = function_seconds(vm, inputs, args.runs)

    library = executable.mod
    rows = []
    for gv, func in mod.functions.items():
        name = gv.name_hint
        if not isinstance(func, tvm.tirx.PrimFunc) or name not in calls:
            continue
        per_call_in_network = float(np.median(per_run[name])) / calls[name]
        alone = median_call_s(library.get_function(name, query_imports=True), _random_args(func, device), 10, 50)
        rows.append(
            {
                "function": name,
                "calls_per_run": calls[name],
                "in_network_ms": per_call_in_network * 1e3,
                "alone_ms": alone * 1e3,
                "ratio": per_call_in_network / alone,
                "schedule": "tuned" if name in functions["tuned"] else "default",
            }
        )
    rows.sort(key=lambda row: -row["in_network_ms"] * row["calls_per_run"])
    kernels = sum(row["in_network_ms"] * row["calls_per_run"] for row in rows)
    alone_total = sum(row["alone_ms"] * row["calls_per_run"] for row in rows)
    print(
        json.dumps(
            {
                "bench": "network_profile",
                "network": args.network,
                "profile": args.profile,
                "tvm_threads": threads,
                "end_to_end_ms": end_to_end * 1e3,
                "instrumented_run_ms": instrumented * 1e3,
                "calls_per_run": sum(calls.values()),
                "kernels_in_network_ms": kernels,
                "kernels_alone_ms": alone_total,
                "beyond_kernels_alone_ms": end_to_end * 1e3 - alone_total,
                "functions": rows,
            }
        )
    )


if __name__ == "__main__":
    main()
