"""CPU speed of TCL's Mamba cost model against TLP's attention model, side by side.

The models are the shipped ones, ``tcl_plugins.cost_models.mamba.MambaNet`` and ``tcl_plugins.cost_models.tlp.TLPNet`` (width 256, as
TLP), at equal depth, one sequence-mixing block each:

* ``tlp``: TLPNet, one 8-head self-attention layer;
* ``mamba``: MambaNet(layers=1, expand=1);
* ``mamba_expand2``: MambaNet(layers=1, expand=2), mamba-ssm's default width of the block.

Measured in one process, interleaved round by round so that load from other jobs on the machine
hits every model alike, at ``--batch`` (512: what MetaSchedule's search predicts at): a training
step (train mode, forward, backward, grad clip 0.5, Adam) and prediction (eval mode under
``torch.no_grad``, as ``tcl.learning.training.predict_groups`` runs it). Each step is timed by the wall
clock and by the CPU time of the thread; with one torch thread (``--threads``, default 1) the
CPU time leaves out the time other jobs hold the core, so it is the steadier of the two on a
shared machine. Medians over all timed steps; ratios are mamba's over tlp's.

Peak memory is the peak resident set during three steps minus the resident set before them, in
a fresh subprocess per model and phase, with glibc returning freed blocks at once (see
``peak_memory_mib``): torch's CPU allocator is invisible to tracemalloc, and the kernel's
high-water mark counts what the process really touched (Linux only).

Correctness of the scan against a loop-over-time reference is tests/test_mamba.py's job.

Prints one JSON line. ``python benchmarks/bench_mamba_speed.py --help`` for the options.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tcl_plugins.cost_models.mamba import MambaNet  # noqa: E402
from tcl_plugins.cost_models.tlp import TLPNet  # noqa: E402

MODELS = {
    "tlp": lambda f: TLPNet(f),
    "mamba": lambda f: MambaNet(f, layers=1, expand=1),
    "mamba_expand2": lambda f: MambaNet(f, layers=1, expand=2),
}
# Environment that changed timings several-fold on the shared 2-core VM (OpenMP spin-waiting
# threads; torch backing big tensors with huge pages); recorded in the JSON.
ENV_KNOBS = ("OMP_WAIT_POLICY", "THP_MEM_ALLOC_ENABLE", "OMP_NUM_THREADS")
MMAP_THRESHOLD = 64 * 1024  # bytes; glibc's MALLOC_MMAP_THRESHOLD_ for the memory probes


class Runner:
    """One model, its optimiser and a fixed random batch."""

    def __init__(self, kind: str, args, seed: int = 0):
        torch.manual_seed(seed)
        self.model = MODELS[kind](args.features)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=7e-4, weight_decay=1e-6)
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(args.batch, args.seq_len, args.features, generator=g)
        self.y = torch.randn(args.batch, generator=g)

    def train_step(self):
        self.model.train()
        self.opt.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(self.model(self.x), self.y)
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), 0.5)
        self.opt.step()

    def predict(self):
        self.model.eval()
        with torch.no_grad():
            self.model(self.x)


def timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this thread) of one call."""
    wall, cpu = time.perf_counter(), time.thread_time()
    fn()
    return time.perf_counter() - wall, time.thread_time() - cpu


def peak_memory_mib(kind: str, phase: str) -> float:
    """Peak resident memory above the resident set before three steps of one model, MiB.

    Run in a fresh process of this script. The kernel's high-water mark (VmHWM) is reset first
    (``clear_refs`` 5), so the peak of importing torch and building the model does not count.
    glibc's malloc is told to map every block of 64 KiB or more on its own, so that a freed
    tensor leaves the resident set at once: with its adaptive default the same probe read
    384-447 MiB from run to run, with this 211.5 +- 0.1.
    """
    cmd = [sys.executable, __file__, *sys.argv[1:], "--probe", f"{kind}:{phase}"]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD)}
    return float(subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout.split()[-1])


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def probe(args) -> None:
    kind, phase = args.probe.split(":")
    r = Runner(kind, args)
    fn = r.train_step if phase == "train" else r.predict
    before = _status_kib("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    for _ in range(3):
        fn()
    print((_status_kib("VmHWM") - before) / 1024)


def measure(kinds, args):
    """Per model: median train step and prediction (wall and CPU), throughput, params, memory."""
    runners = {k: Runner(k, args) for k in kinds}
    for r in runners.values():  # warm-up: first-call allocations
        r.train_step()
        r.predict()
    times = {k: {"train": [], "predict": []} for k in kinds}
    for _ in range(args.rounds):
        for k, r in runners.items():
            times[k]["train"] += [timed(r.train_step) for _ in range(args.steps)]
            times[k]["predict"] += [timed(r.predict) for _ in range(args.steps)]
    res = {}
    for k, r in runners.items():
        row = {"params": sum(p.numel() for p in r.model.parameters())}
        for phase, samples in times[k].items():
            wall = statistics.median(s[0] for s in samples)
            cpu = statistics.median(s[1] for s in samples)
            if phase == "train":
                row["train_step_ms"], row["train_step_cpu_ms"] = round(1e3 * wall, 1), round(1e3 * cpu, 1)
            else:
                row["predict_programs_per_s"] = round(args.batch / wall)
                row["predict_cpu_programs_per_s"] = round(args.batch / cpu)
        if not args.no_memory:
            row["peak_train_mib"] = round(peak_memory_mib(k, "train"), 1)
            row["peak_predict_mib"] = round(peak_memory_mib(k, "predict"), 1)
        res[k] = row
    ratios = {}
    if "tlp" in res:
        for k in res:
            if k == "tlp":
                continue
            ratios[k] = {m: round(res[k][m] / res["tlp"][m], 3) for m in res[k] if m != "params"}
    return res, ratios


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--seq-len", type=int, default=25)
    p.add_argument("--features", type=int, default=22)
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    p.add_argument("--steps", type=int, default=2, help="timed steps per model, phase and round")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads, the same for every model")
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, from {', '.join(MODELS)}")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    p.add_argument("--probe", help=argparse.SUPPRESS)  # KIND:PHASE, run by peak_memory_mib
    return p.parse_args(argv)


def main():
    args = parse_args()
    load0 = round(os.getloadavg()[0], 2)
    torch.set_num_threads(args.threads)
    if args.probe:
        return probe(args)
    results, ratios = measure(args.models.split(","), args)
    print(
        json.dumps(
            {
                "config": {
                    "batch": args.batch,
                    "seq_len": args.seq_len,
                    "features": args.features,
                    "d_model": 256,
                    "mixing_blocks": 1,
                    "threads": torch.get_num_threads(),
                    "torch": torch.__version__,
                    "timed_steps": args.rounds * args.steps,
                    "env": {k: os.environ.get(k, "") for k in ENV_KNOBS},
                    "load_avg_1min_start_end": [load0, round(os.getloadavg()[0], 2)],
                },
                "results": results,
                "ratios_vs_tlp": ratios,
            }
        )
    )


if __name__ == "__main__":
    main()
