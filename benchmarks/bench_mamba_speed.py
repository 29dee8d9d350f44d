"""CPU speed of the Mamba cost model against TLP-style attention and an LSTM, side by side.

Every model is TLP's encoder (Linear+ReLU up to d_model), ``--layers`` sequence-mixing blocks,
TLP's two residual Linear(d_model)+ReLU blocks and a Linear(d_model, 1) decoder summed over the
steps; only the mixing block differs:

* ``mamba``: x + Mamba(RMSNorm(x)) with tcl.mamba's scan;
* ``mamba_loop``: the same block with a plain loop-over-time autograd scan;
* ``attention``: x + MultiheadAttention(x, 8 heads) (TLP);
* ``lstm``: x + LSTM(x).

Measured in one process, interleaved round by round so that load from other jobs on the machine
hits every model alike: a training step (forward, backward, grad clip 0.5, Adam) and inference
(forward under ``torch.inference_mode``), both at ``--batch``; medians over all timed steps.
``+compile`` models report their first (compiling) train step and inference call apart.
Peak memory is the peak resident set during three steps minus the resident set before them, in
a fresh subprocess per model and phase: torch's CPU allocator is invisible to tracemalloc, and
the kernel's high-water mark counts what the process really touched (Linux only). After timing,
the fast and the loop scan run on the same weights and inputs, and the largest relative
difference of their outputs and gradients is reported.

Two settings of the environment mattered more than any model change, for every model:
``OMP_WAIT_POLICY=PASSIVE`` (with other jobs on the two cores, OpenMP's spinning threads made a
two-thread scan take 3.5 s instead of 0.5 s with one thread) and ``THP_MEM_ALLOC_ENABLE=1``
(torch then backs big tensors with huge pages: a fresh 26 MB tensor cost 6400 page faults, and
an elementwise op writing one took 42 ms instead of 12). The JSON records them and the load.

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

import torch
from torch import nn

from tcl.mamba import Mamba, RMSNorm

MODELS = ("mamba", "mamba_loop", "attention", "lstm")
# Environment that changed these timings several-fold on the shared 2-core VM (see the docstring).
ENV_KNOBS = ("OMP_WAIT_POLICY", "THP_MEM_ALLOC_ENABLE", "OMP_NUM_THREADS")


def loop_scan(u, delta, A, B, C):
    """The plain scan: h_t = exp(delta_t A) h_{t-1} + delta_t u_t B_t, one autograd step per t."""
    h = u.new_zeros(u.shape[1], u.shape[2], A.shape[1])
    ys = []
    for t in range(u.shape[0]):
        h = torch.exp(delta[t].unsqueeze(-1) * A) * h + (delta[t] * u[t]).unsqueeze(-1) * B[t].unsqueeze(1)
        ys.append(torch.bmm(h, C[t].unsqueeze(-1)).squeeze(-1))
    return torch.stack(ys)


class LoopMamba(Mamba):
    scan = staticmethod(loop_scan)


class MambaMixer(nn.Module):
    def __init__(self, d: int, block=Mamba):
        super().__init__()
        self.norm, self.mamba = RMSNorm(d), block(d)

    def forward(self, x):
        return x + self.mamba(self.norm(x))


class AttentionMixer(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.attention = nn.MultiheadAttention(d, 8, batch_first=True)

    def forward(self, x):
        return x + self.attention(x, x, x, need_weights=False)[0]


class LSTMMixer(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.lstm = nn.LSTM(d, d, batch_first=True)

    def forward(self, x):
        return x + self.lstm(x)[0]


class CostModel(nn.Module):
    def __init__(self, kind: str, features: int, d: int, layers: int):
        super().__init__()
        widths = [features, min(64, d), min(128, d), d, d]
        enc = []
        for a, b in zip(widths, widths[1:]):
            enc += [nn.Linear(a, b), nn.ReLU()]
        self.encoder = nn.Sequential(*enc)
        mixer = {"mamba": MambaMixer, "mamba_loop": lambda d: MambaMixer(d, LoopMamba),
                 "attention": AttentionMixer, "lstm": LSTMMixer}[kind]
        self.mixers = nn.Sequential(*[mixer(d) for _ in range(layers)])
        self.residual = nn.ModuleList(nn.Linear(d, d) for _ in range(2))
        self.decoder = nn.Linear(d, 1)

    def forward(self, x):
        x = self.mixers(self.encoder(x))
        for lin in self.residual:
            x = x + torch.relu(lin(x))
        return self.decoder(x).sum(dim=(1, 2))


class Runner:
    """One model (``kind``, or ``kind+compile`` for torch.compile of it), its optimiser, a batch."""

    def __init__(self, kind: str, d_model: int, args, seed: int = 0):
        torch.manual_seed(seed)
        base, _, compiled = kind.partition("+")
        self.model = CostModel(base, args.features, d_model, args.layers)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=7e-4, weight_decay=1e-6)
        if compiled:
            self.model = torch.compile(self.model)
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(args.batch, args.seq_len, args.features, generator=g)
        self.y = torch.randn(args.batch, generator=g)

    def train_step(self):
        self.opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(self.model(self.x), self.y)
        loss.backward()
        nn.utils.clip_grad_norm_(self.model.parameters(), 0.5)
        self.opt.step()

    def infer(self):
        with torch.inference_mode():
            self.model(self.x)


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def check_scans(d_model: int, args) -> float:
    """Max relative difference between the fast and the loop scan: outputs and gradients."""
    fast, loop = Runner("mamba", d_model, args), Runner("mamba_loop", d_model, args)
    loop.model.load_state_dict(fast.model.state_dict())
    worst = 0.0
    out = [r.model(r.x) for r in (fast, loop)]
    for o in out:
        o.sum().backward()
    pairs = [(out[0], out[1])] + [(p.grad, q.grad) for p, q in zip(fast.model.parameters(), loop.model.parameters())]
    for a, b in pairs:
        worst = max(worst, ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item())
    return worst


def peak_memory_mib(kind: str, d_model: int, phase: str) -> float:
    """Peak resident memory above the resident set before three steps of one model, MiB.

    Run in a fresh process of this script. The kernel's high-water mark (VmHWM) is reset first
    (``clear_refs`` 5), so the peak of importing torch and building the model does not count.
    """
    cmd = [sys.executable, __file__, *sys.argv[1:], "--probe", f"{kind}:{d_model}:{phase}"]
    return float(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()[-1])


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def probe(args) -> None:
    kind, d_model, phase = args.probe.split(":")
    r = Runner(kind, int(d_model), args)
    fn = r.train_step if phase == "train" else r.infer
    before = _status_kib("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    for _ in range(3):
        fn()
    print((_status_kib("VmHWM") - before) / 1024)


def measure(kinds, d_model: int, args):
    """Medians (and peak memory) of every model at one width, and Mamba's ratios to the others."""
    runners = {k: Runner(k, d_model, args) for k in kinds}
    warmup = {k: (timed(r.train_step), timed(r.infer)) for k, r in runners.items()}  # compiles, if asked
    train = {k: [] for k in kinds}
    infer = {k: [] for k in kinds}
    for _ in range(args.rounds):
        for k, r in runners.items():
            train[k] += [timed(r.train_step) for _ in range(args.steps)]
            infer[k] += [timed(r.infer) for _ in range(args.steps)]
    params = {k: sum(p.numel() for p in r.model.parameters()) for k, r in runners.items()}
    del runners
    res = {}
    for k in kinds:
        res[k] = {
            "train_step_ms": round(1e3 * statistics.median(train[k]), 1),
            "infer_programs_per_s": round(args.batch / statistics.median(infer[k])),
            "params": params[k],
        }
        if k.endswith("+compile"):
            res[k]["compile_train_s"], res[k]["compile_infer_s"] = (round(t, 1) for t in warmup[k])
        elif not args.no_memory:
            res[k]["peak_train_mib"] = round(peak_memory_mib(k, d_model, "train"), 1)
            res[k]["peak_infer_mib"] = round(peak_memory_mib(k, d_model, "infer"), 1)
    ratios = {}
    pairs = [("mamba", k) for k in kinds if "+" not in k and k != "mamba"] + [("mamba+compile", "attention+compile")]
    for ours, other in pairs:
        if ours in res and other in res:
            a, b = res[ours], res[other]
            ratios[f"{ours}_train_vs_{other}"] = round(a["train_step_ms"] / b["train_step_ms"], 3)
            ratios[f"{ours}_infer_vs_{other}"] = round(a["infer_programs_per_s"] / b["infer_programs_per_s"], 3)
    return res, ratios


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--d-model", default="256,64", help="comma-separated widths, each measured in turn")
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--seq-len", type=int, default=25)
    p.add_argument("--features", type=int, default=22)
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    p.add_argument("--steps", type=int, default=3, help="timed steps per model per round")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    p.add_argument("--models", default=",".join(MODELS),
                   help=f"from {', '.join(MODELS)}; append +compile for torch.compile of a model")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    p.add_argument("--probe", help=argparse.SUPPRESS)  # KIND:D_MODEL:PHASE, run by peak_memory_mib
    return p.parse_args(argv)


def main():
    args = parse_args()
    load0 = round(os.getloadavg()[0], 2)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.probe:
        return probe(args)
    kinds = args.models.split(",")
    results, ratios, rel_diff = {}, {}, {}
    for d_model in map(int, args.d_model.split(",")):
        results[d_model], ratios[d_model] = measure(kinds, d_model, args)
        if {"mamba", "mamba_loop"} <= set(kinds):
            rel_diff[d_model] = check_scans(d_model, args)
    print(json.dumps({
        "config": {"batch": args.batch, "seq_len": args.seq_len, "layers": args.layers,
                   "threads": torch.get_num_threads(), "torch": torch.__version__,
                   "timed_steps": args.rounds * args.steps,
                   "env": {k: os.environ.get(k, "") for k in ENV_KNOBS},
                   "load_avg_1min_start_end": [load0, round(os.getloadavg()[0], 2)]},
        "fast_vs_loop_scan_max_rel_diff": rel_diff,
        "results": results, "ratios": ratios,
    }))


if __name__ == "__main__":
    main()
