"""How steady is torch eager's latency on this machine? Times a registered network with torch
``--blocks`` times in a row in one process (each block: the median of ``--repeats`` timings of
5 calls, as `tcl tune` times torch), with 2 threads and with 1, and prints one JSON line per
thread count: the block medians and their spread (max/min). `tcl tune`'s "x torch" ratio is
only as steady as this.

    python benchmarks/bench_torch_noise.py --network bert-tiny
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from tcl.learning.training import torch_threads
from tcl.measurement.networks import resolve_network
from tcl.tuning.timing import median_call_s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--network", default="bert-tiny")
    ap.add_argument("--blocks", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    _, net = resolve_network(args.network)
    with torch.no_grad():
        for threads in (2, 1):
            with torch_threads(threads):
                ms = [median_call_s(net.module, net.example_inputs, args.repeats) * 1e3 for _ in range(args.blocks)]
            print(
                json.dumps(
                    {
                        "network": args.network,
                        "threads": threads,
                        "block_medians_ms": [round(m, 3) for m in ms],
                        "spread": round(max(ms) / min(ms), 3),
                        "median_ms": round(float(np.median(ms)), 3),
                    }
                )
            )


if __name__ == "__main__":
    main()
