"""On an NVIDIA GPU: the cuda backend on a few candidates, and mamba-ssm's kernels against the pure-torch block.

The parts a CPU machine cannot check, in one run, printing one JSON line:

* ``cuda_backend``: ``tcl collect --profile cuda-sm90`` on the heaviest task of ``--network``,
  ``--candidates`` programs built with nvcc through TVM and timed on the GPU; records and errors
  read back with TVM's own JSONDatabase.
* ``block_check``: TCL's Mamba block (float32, expand 1 and 2) with the same weights and input,
  once through mamba-ssm's CUDA kernels and once through the pure-torch code that CPUs run; the
  largest absolute difference of the outputs (goal: at most 1e-4) and of every gradient.
* ``speed``: the cost model's network (MambaNet) on the GPU, a training step (forward, backward,
  grad clip, Adam) and prediction at ``--batch``, each path, CUDA-synchronised medians.
* ``train``: ``tcl train --model mamba`` on ``--data`` with each path, its wall time, then
  ``tcl eval`` of both checkpoints on the held-out network.

Which path the block takes is chosen by ``tcl_plugins.cost_models.mamba_block``: mamba-ssm's kernels when the tensor is on
CUDA and mamba-ssm imports. The pure-torch side is forced by telling that module mamba-ssm is
absent. Every part reports its error instead of stopping the others.

    python benchmarks/bench_gpu.py --out /tmp/gpu-check
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tcl_plugins.cost_models import mamba_block  # noqa: E402
from tcl_plugins.cost_models.mamba import MambaNet  # noqa: E402

# Run a tcl command in a child process with mamba-ssm's kernels hidden from tcl_plugins.cost_models.mamba_block.
PURE_TORCH_CLI = "import sys; import tcl_plugins.cost_models.mamba_block as m; m._MAMBA_SSM = False; from tcl.cli.main import main; sys.exit(main(sys.argv[1:]))"
KERNELS_CLI = "import sys; from tcl.cli.main import main; sys.exit(main(sys.argv[1:]))"


class pure_torch:
    """Within the block, tcl_plugins.cost_models.mamba_block takes its pure-torch path even on CUDA."""

    def __enter__(self):
        self.saved = mamba_block._MAMBA_SSM
        mamba_block._MAMBA_SSM = False

    def __exit__(self, *exc):
        mamba_block._MAMBA_SSM = self.saved


def kernels_available(device: str) -> dict:
    x = torch.zeros(1, device=device)
    ops = mamba_block._mamba_ssm_ops(x)
    info = {"selective_scan_fn": bool(ops), "mamba_inner_fn": bool(ops and ops[1] is not None)}
    try:
        import mamba_ssm

        info["mamba_ssm_version"] = mamba_ssm.__version__
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        info["mamba_ssm_import_error"] = f"{type(exc).__name__}: {exc}"
    return info


def tcl_cmd(args: list[str], pure: bool = False) -> subprocess.CompletedProcess:
    """Run in ROOT (for relative paths) with the installed package: PYTHONSAFEPATH keeps the
    checkout's tcl/, which lacks the installed tcl.hardware_profiles, off the child's path."""
    code = PURE_TORCH_CLI if pure else KERNELS_CLI
    env = {**os.environ, "PYTHONSAFEPATH": "1"}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, env=env)


def cuda_backend(args, work: Path) -> dict:
    out = work / "cuda-records"
    t0 = time.perf_counter()
    proc = tcl_cmd(
        [
            "collect",
            "--profile",
            "cuda-sm90",
            "--network",
            args.network,
            "--pool-size",
            str(args.candidates),
            "--max-tasks",
            "1",
            "--out",
            str(out),
        ]
    )
    row = {"seconds": round(time.perf_counter() - t0, 1), "exit": proc.returncode}
    if proc.returncode:
        row["stderr_tail"] = proc.stderr[-2000:]
        return row
    from tvm.s_tir import meta_schedule as ms

    db = ms.database.JSONDatabase(
        path_workload=str(out / "database_workload.json"),
        path_tuning_record=str(out / "database_tuning_record.json"),
    )
    records = db.get_all_tuning_records()
    secs = [float(r.run_secs[0]) for r in records if r.run_secs]
    ok = sorted(s for s in secs if 0 < s < 1e9)
    row.update(
        records=len(records),
        ok=len(ok),
        errors=len(records) - len(ok),
        best_us=round(ok[0] * 1e6, 2) if ok else None,
        median_us=round(statistics.median(ok) * 1e6, 2) if ok else None,
        target=str(records[0].target) if records else None,
    )
    return row


def max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max())


def block_check(args) -> dict:
    rows = {}
    for expand in (1, 2):
        torch.manual_seed(0)
        block = mamba_block.Mamba(256, expand=expand).to(args.device)
        x = torch.randn(64, args.seq_len, 256, device=args.device)
        results = []
        for pure in (False, True):
            block.zero_grad(set_to_none=True)
            xi = x.clone().requires_grad_(True)
            if pure:
                with pure_torch():
                    y = block(xi)
            else:
                y = block(xi)
            (y * torch.linspace(-1, 1, y.numel(), device=args.device).view_as(y)).sum().backward()
            grads = {"input": xi.grad.detach().clone()}
            grads.update({n: p.grad.detach().clone() for n, p in block.named_parameters()})
            results.append((y.detach(), grads))
        (y_k, g_k), (y_t, g_t) = results
        grad_diffs = {n: max_abs_diff(g_k[n], g_t[n]) for n in g_k}
        worst = max(grad_diffs, key=grad_diffs.get)
        rows[f"expand{expand}"] = {
            "output_max_abs_diff": max_abs_diff(y_k, y_t),
            "output_max_abs": float(y_t.abs().max()),
            "grad_max_abs_diff": grad_diffs[worst],
            "grad_worst": worst,
            "grad_worst_max_abs": float(g_t[worst].abs().max()),
        }
    rows["outputs_within_1e-4"] = all(r["output_max_abs_diff"] <= 1e-4 for r in rows.values())
    return rows


def cuda_timed(fn, steps: int) -> float:
    """Median milliseconds of ``steps`` calls, each synchronised."""
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    samples = []
    for _ in range(steps):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(samples)


def speed(args) -> dict:
    torch.manual_seed(0)
    model = MambaNet(args.features).to(args.device)
    opt = torch.optim.Adam(model.parameters(), lr=7e-4)
    x = torch.randn(args.batch, args.seq_len, args.features, device=args.device)
    y = torch.randn(args.batch, device=args.device)

    def train_step():
        model.train()
        opt.zero_grad(set_to_none=True)
        nn.functional.mse_loss(model(x), y).backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()

    def predict():
        model.eval()
        with torch.no_grad():
            model(x)

    res = {}
    for name, ctx in (("kernels", None), ("pure_torch", pure_torch)):
        times = {"train": [], "predict": []}
        for _ in range(args.rounds):  # interleaved with the other path round by round
            with ctx() if ctx else _nothing():
                train_step(), predict()  # warm-up of this round's path
                times["train"].append(cuda_timed(train_step, args.steps))
                times["predict"].append(cuda_timed(predict, args.steps))
        res[name] = {
            "train_step_ms": round(statistics.median(times["train"]), 3),
            "predict_programs_per_s": round(args.batch / (statistics.median(times["predict"]) / 1e3)),
        }
    res["train_step_speedup"] = round(res["pure_torch"]["train_step_ms"] / res["kernels"]["train_step_ms"], 2)
    res["predict_speedup"] = round(
        res["kernels"]["predict_programs_per_s"] / res["pure_torch"]["predict_programs_per_s"], 2
    )
    return res


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return None


def train(args, work: Path) -> dict:
    res = {}
    for name, pure in (("kernels", False), ("pure_torch", True)):
        ckpt = work / f"mamba-{name}"
        t0 = time.perf_counter()
        proc = tcl_cmd(
            [
                "train",
                "--model",
                "mamba",
                "--data",
                args.data,
                "--profile",
                args.profile,
                "--held-out",
                args.held_out,
                "--epochs",
                str(args.epochs),
                "--out",
                str(ckpt),
            ],
            pure=pure,
        )
        row = {"seconds": round(time.perf_counter() - t0, 1), "exit": proc.returncode}
        if proc.returncode:
            row["stderr_tail"] = proc.stderr[-2000:]
        else:
            ev = tcl_cmd(
                [
                    "eval",
                    "--model",
                    str(ckpt),
                    "--data",
                    args.data,
                    "--profile",
                    args.profile,
                    "--network",
                    args.held_out,
                    "--json",
                ]
            )
            if ev.returncode:
                row["eval_stderr_tail"] = ev.stderr[-2000:]
            else:
                scores = json.loads(ev.stdout)
                row.update({k: round(v, 4) for k, v in scores.items() if k in ("top1", "top5", "pairwise")})
        res[name] = row
    return res


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="work directory (records, checkpoints, the JSON line)")
    p.add_argument("--network", default="bert-tiny", help="network whose heaviest task the cuda backend measures")
    p.add_argument("--candidates", type=int, default=8, help="programs measured through the cuda backend")
    p.add_argument("--data", default="data/bundled", help="records tcl train learns from")
    p.add_argument("--profile", default="x86-avx2", help="profile of those records")
    p.add_argument("--held-out", default="bert-tiny", help="network kept out of training and evaluated on")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--seq-len", type=int, default=25)
    p.add_argument("--features", type=int, default=22)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--parts", default="cuda_backend,block_check,speed,train")
    p.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # cpu: check this script's plumbing
    args = p.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("bench_gpu.py: no CUDA device visible to torch")
    work = Path(args.out)
    work.mkdir(parents=True, exist_ok=True)
    result = {
        "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else None,
        "torch": torch.__version__,
        **kernels_available(args.device),
    }
    parts = {"cuda_backend": lambda: cuda_backend(args, work), "block_check": lambda: block_check(args)}
    parts.update(speed=lambda: speed(args), train=lambda: train(args, work))
    for name in args.parts.split(","):
        t0 = time.perf_counter()
        try:
            result[name] = parts[name]()
        except Exception:  # noqa: BLE001 - one part's failure is reported, the others still run
            result[name] = {"error": traceback.format_exc()[-2000:]}
        print(f"bench_gpu.py: {name} done in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    line = json.dumps(result)
    (work / "bench_gpu.json").write_text(line + "\n")
    print(line)


if __name__ == "__main__":
    main()
