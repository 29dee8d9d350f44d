"""Transfer strategies on the bundled records: a teacher trained on SOURCE moves to TARGET with
a 10% RDU sample; held-out network tasks score it on TARGET and on SOURCE (forgetting).
Runs the continual-kd grid used to choose its defaults, then the baselines, for each seed (a
seed changes the sample and the training order); prints one JSON line with every run and the
mean over seeds per configuration.

    .venv/bin/python benchmarks/bench_transfer.py --work-dir /tmp/bench-transfer

The teacher checkpoint is cached in the work dir (delete it to retrain).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from tcl.api import discovery
from tcl.learning.evaluation import load_checkpoint, score_records
from tcl.learning.transfer import load_platform, select_sample, transfer_step

ROOT = Path(__file__).resolve().parents[1]


def scores(model, held) -> dict:
    result = score_records(model, held)
    return {k: round(float(result[k]), 4) for k in ("top1", "top5", "pairwise")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT / "data" / "bundled")
    ap.add_argument("--source", default="x86-avx512")
    ap.add_argument("--target", default="x86-avx2")
    ap.add_argument("--held-out", default="bert-tiny")
    ap.add_argument("--model", default="mamba")
    ap.add_argument("--layers", type=int, default=1, help="Mamba blocks (1 keeps CPU time down)")
    ap.add_argument("--teacher-epochs", type=int, default=6)
    ap.add_argument("--epochs", type=int, default=8, help="epochs of every transfer run")
    ap.add_argument("--budget", type=float, default=0.1)
    ap.add_argument("--sampler", default="rdu")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument(
        "--grid", default="0.5:1,2:1,8:1,0.5:4,2:4,8:4", help="continual-kd lam:tau pairs (distill on labelled)"
    )
    ap.add_argument("--work-dir", type=Path, required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    held_out = [n for n in args.held_out.split(",") if n]
    source_train, source_held = load_platform(args.data, args.source, held_out)
    target_train, target_held = load_platform(args.data, args.target, held_out)
    ckpt = args.work_dir / "teacher"
    start = time.perf_counter()
    if (ckpt / "config.json").is_file():
        teacher = load_checkpoint(ckpt, threads=1, verbose=False)
    else:
        arch = {"layers": args.layers} if args.model == "mamba" else {}
        teacher = discovery.registry().create(
            "cost_models", args.model, epochs=args.teacher_epochs, threads=1, verbose=False, **arch
        )
        teacher.fit(source_train, seed=0)
        teacher.save(ckpt)
    teacher_s = time.perf_counter() - start
    seeds = [int(s) for s in args.seeds.split(",") if s]
    samples = {seed: select_sample(target_train, args.sampler, args.budget, seed=seed) for seed in seeds}
    runs = [
        {
            "strategy": "teacher as is",
            "options": {},
            "seed": None,
            "target": scores(teacher, target_held),
            "source": scores(teacher, source_held),
            "parameters": teacher.parameter_count(),
            "train_s": round(teacher_s, 1),
            "programs_measured": 0,
            "programs_trained": len(source_train),
        }
    ]

    def run(strategy: str, **options) -> None:
        for seed, (sample, rest) in samples.items():
            model, seconds, trained = transfer_step(
                strategy,
                teacher,
                sample,
                unlabelled=rest,
                history={args.source: source_train},
                options={"epochs": args.epochs, **options},
                seed=seed,
            )
            runs.append(
                {
                    "strategy": strategy,
                    "options": options,
                    "seed": seed,
                    "target": scores(model, target_held),
                    "source": scores(model.for_platform(args.source), source_held),
                    "parameters": model.parameter_count(),
                    "train_s": round(seconds, 1),
                    "programs_measured": len(sample),
                    "programs_trained": trained,
                }
            )
            print(json.dumps(runs[-1]), file=sys.stderr, flush=True)

    grid = [tuple(float(x) for x in pair.split(":")) for pair in args.grid.split(",") if pair]
    for lam, tau in grid:
        run("continual-kd", lam=lam, tau=tau, distill_on="labelled")
    kd = [m for m in summarize(runs) if m["strategy"] == "continual-kd"]
    best = max(kd, key=lambda m: m["target_top1"])["options"]
    run("continual-kd", lam=best["lam"], tau=best["tau"], distill_on="pool")
    for strategy in ("fine-tune", "mtl", "scratch"):
        run(strategy)
    print(
        json.dumps(
            {
                "benchmark": "transfer",
                "source": args.source,
                "target": args.target,
                "held_out": held_out,
                "model": args.model,
                "layers": args.layers,
                "teacher_epochs": args.teacher_epochs,
                "epochs": args.epochs,
                "budget": args.budget,
                "sampler": args.sampler,
                "seeds": seeds,
                "mean": summarize(runs),
                "runs": runs,
            }
        )
    )


def summarize(runs: list[dict]) -> list[dict]:
    """Mean over seeds of each (strategy, options)."""
    by: dict[str, list[dict]] = {}
    for r in runs:
        by.setdefault(json.dumps([r["strategy"], r["options"]], sort_keys=True), []).append(r)
    out = []
    for rs in by.values():
        mean = lambda f, rs=rs: round(statistics.fmean(f(r) for r in rs), 4)  # noqa: E731
        out.append(
            {
                "strategy": rs[0]["strategy"],
                "options": rs[0]["options"],
                "n": len(rs),
                "target_top1": mean(lambda r: r["target"]["top1"]),
                "target_top5": mean(lambda r: r["target"]["top5"]),
                "source_top1": mean(lambda r: r["source"]["top1"]),
                "source_top5": mean(lambda r: r["source"]["top5"]),
                "parameters": rs[0]["parameters"],
                "train_s": mean(lambda r: r["train_s"]),
                "programs_measured": rs[0]["programs_measured"],
                "programs_trained": rs[0]["programs_trained"],
            }
        )
    return out


if __name__ == "__main__":
    main()
