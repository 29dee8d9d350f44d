"""Do clean training labels help? One cost model trained twice on the *same programs* of the
same training tasks, once with their bundled timings (taken on a shared, loaded machine) and
once with their idle re-measurement (data/idle), both scored on held-out bert-tiny's idle
timings. Only tasks and programs present and measured in both sources are used, so the label
source is the only difference. Prints one JSON line per profile and model (mean and spread
over seeds).

    python benchmarks/clean_labels.py --profiles x86-avx2,x86-avx512,x86-generic --seeds 0,1
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from tcl import discovery
from tcl.database import load_records
from tcl.evaluation import score_records
from tcl.feature_cache import default_cache_dir
from tcl.programs import ProgramSet
from tcl.training import split_by_network

METRICS = ("top1", "top5", "pairwise")


def _trace_key(program) -> str:
    return json.dumps(program.trace, sort_keys=True)


def common_programs(a: ProgramSet, b: ProgramSet) -> tuple[ProgramSet, ProgramSet]:
    """``a`` and ``b`` cut down to the tasks and programs (by trace) both hold."""
    out_a, out_b = ProgramSet(profile=a.profile), ProgramSet(profile=b.profile)
    for key in a.tasks.keys() & b.tasks.keys():
        shared = {_trace_key(p) for p in a.programs[key]} & {_trace_key(p) for p in b.programs[key]}
        if len(shared) < 2:
            continue
        out_a.add(a.tasks[key], [p for p in a.programs[key] if _trace_key(p) in shared])
        out_b.add(b.tasks[key], [p for p in b.programs[key] if _trace_key(p) in shared])
    return out_a, out_b


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--noisy", type=Path, default=Path("data/bundled"))
    ap.add_argument("--clean", type=Path, default=Path("data/idle"))
    ap.add_argument("--profiles", default="x86-avx2,x86-avx512,x86-generic")
    ap.add_argument("--held-out", default="bert-tiny")
    ap.add_argument("--models", default="mamba")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--per-task", action="store_true", help="also each held-out task's Top-1 per source and seed")
    args = ap.parse_args()
    registry = discovery.registry()
    held_out = args.held_out.split(",")
    for profile in args.profiles.split(","):
        clean_all = load_records(args.clean, profile=profile).measured()
        train_clean, held = split_by_network(clean_all, held_out)
        train_noisy, _ = split_by_network(load_records(args.noisy, profile=profile).measured(), held_out)
        train_noisy, train_clean = common_programs(train_noisy, train_clean)
        for model_name in args.models.split(","):
            options = {"verbose": False, "cache_dir": str(default_cache_dir()), "epochs": args.epochs,
                       "batch_size": args.batch_size}
            if model_name == "mamba":
                options.update(layers=1, expand=1)  # the shipped architecture
            figures: dict[str, list[dict[str, float]]] = {"noisy": [], "clean": []}
            for seed in (int(s) for s in args.seeds.split(",")):
                for source, train in (("noisy", train_noisy), ("clean", train_clean)):
                    model = registry.create("cost_models", model_name, **options)
                    start = time.perf_counter()
                    model.fit(train, None, seed=seed)
                    fit_s = time.perf_counter() - start
                    scored = score_records(model, held, per_task=args.per_task)
                    figures[source].append({**{k: float(scored[k]) for k in METRICS}, "fit_s": fit_s})
                    if args.per_task:
                        print(json.dumps({"profile": profile, "model": model_name, "labels": source, "seed": seed,
                                          "per_task": {t["task"]: round(t["top1"], 3) for t in scored["per_task"]}}),
                              flush=True)
            line = {"profile": profile, "model": model_name, "train_tasks": len(train_clean.tasks),
                    "train_programs": len(train_clean), "held_out": held_out, "held_tasks": len(held.tasks),
                    "seeds": args.seeds, "epochs": args.epochs}
            for source, runs in figures.items():
                for k in (*METRICS, "fit_s"):
                    values = np.array([r[k] for r in runs])
                    line[f"{source}_{k}"] = round(float(values.mean()), 4)
                    if k in METRICS:
                        line[f"{source}_{k}_std"] = round(float(values.std(ddof=1)) if values.size > 1 else 0.0, 4)
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
