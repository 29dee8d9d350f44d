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
from pathlib import Path
from typing import Any

from tcl.api import discovery
from tcl.api.programs import ProgramSet
from tcl.experiments._common import fit_score, summarize
from tcl.learning.record_sets import split_by_network
from tcl.records.database import load_records
from tcl.records.feature_cache import default_cache_dir


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
            options = {
                "verbose": False,
                "cache_dir": str(default_cache_dir()),
                "epochs": args.epochs,
                "batch_size": args.batch_size,
            }
            if model_name == "mamba":
                options.update(layers=1, expand=1)  # the shipped architecture
            figures: dict[str, list[dict[str, Any]]] = {"noisy": [], "clean": []}
            for seed in (int(s) for s in args.seeds.split(",")):
                for source, train in (("noisy", train_noisy), ("clean", train_clean)):
                    run = fit_score(registry, model_name, options, train, held, seed, per_task=args.per_task)
                    figures[source].append(run)
                    if args.per_task:
                        print(
                            json.dumps(
                                {
                                    "profile": profile,
                                    "model": model_name,
                                    "labels": source,
                                    "seed": seed,
                                    "per_task": {k: round(v, 3) for k, v in run["per_task"].items()},
                                }
                            ),
                            flush=True,
                        )
            line = {
                "profile": profile,
                "model": model_name,
                "train_tasks": len(train_clean.tasks),
                "train_programs": len(train_clean),
                "held_out": held_out,
                "held_tasks": len(held.tasks),
                "seeds": args.seeds,
                "epochs": args.epochs,
            }
            for source, runs in figures.items():
                line.update({f"{source}_{k}": round(v, 4) for k, v in summarize(runs).items() if k != "seeds"})
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
