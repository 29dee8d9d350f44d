"""Is a compiled network's speed a property of the compiled instance or of the moment? One
JSON line: the network compiled ``--compiles`` times from a record directory, two VMs of each,
all of them timed in turn in ``--blocks`` rounds (each a median of 10 x 5 runs). If the
instances differ within a round, it is the instance (memory placement, code); if whole rounds
differ, every instance at once, it is the machine's phase, and timing two sides one after the
other can compare a fast phase with a slow one.

    python benchmarks/bench_timing_phases.py --network mobilenet-v2 --records DIR

``--records`` is a tuning record directory (what ``tcl tune --out DIR`` wrote there).
Run it with nothing else on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--network", default="bert-tiny")
    parser.add_argument("--records", required=True, type=Path)
    parser.add_argument("--profile", default="native")
    parser.add_argument("--compiles", type=int, default=3)
    parser.add_argument("--blocks", type=int, default=8)
    args = parser.parse_args()

    import numpy as np
    import tvm
    from tvm import relax

    from tcl.api.measure import set_tvm_threads
    from tcl.api.profiles import get_profile
    from tcl.measurement.networks import resolve_network
    from tcl.tuning.build import compile_network
    from tcl.tuning.timing import network_seconds

    profile = get_profile(args.profile)
    threads = set_tvm_threads(int(profile.runtime_threads))
    _, definition = resolve_network(args.network)
    device = tvm.cpu()
    inputs = [tvm.runtime.tensor(x.numpy(), device) for x in definition.example_inputs]
    vms = []
    for _ in range(args.compiles):
        executable, _, _ = compile_network(definition, profile.tvm_target(), args.records)
        vms += [relax.VirtualMachine(executable, device) for _ in range(2)]
    rounds = [[network_seconds(vm, device, inputs, 10) * 1e3 for vm in vms] for _ in range(args.blocks)]
    table = np.array(rounds)
    within = np.median(table.max(axis=1) / table.min(axis=1))
    medians = np.median(table, axis=1)
    print(
        json.dumps(
            {
                "bench": "timing_phases",
                "network": args.network,
                "profile": args.profile,
                "tvm_threads": threads,
                "instances": len(vms),
                "rounds_ms": [[round(ms, 3) for ms in row] for row in rounds],
                "round_median_ms": [round(float(ms), 3) for ms in medians],
                "slowest_over_fastest_round": round(float(medians.max() / medians.min()), 3),
                "slowest_over_fastest_instance_within_a_round": round(float(within), 3),
            }
        )
    )


if __name__ == "__main__":
    main()
