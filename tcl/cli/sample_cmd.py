"""``tcl sample``: choose a subset of measured records with a sampler (offline)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "sample", help="choose a subset of measured records with a sampler (offline)",
        description="Per task, choose --budget of the measured programs under DATA with a sampler and write them "
                    "to SUBSET_DIR as a TVM JSONDatabase, to study samplers without measuring again. "
                    "(Online sampling while measuring: tcl collect --sampler S --budget F.)")
    parser.add_argument("--sampler", required=True, help="sampler name: rdu, rdu-r, rdu-d, rdu-u, random, all, ...")
    parser.add_argument("--budget", type=float, default=0.1, help="per task: fraction (0-1) or whole count (default 0.1)")
    parser.add_argument("--data", type=Path, required=True, help="record directory (searched recursively)")
    parser.add_argument("--profile", default=None, help="only records of this profile")
    parser.add_argument("--model", type=Path, default=None, help="checkpoint giving embeddings and uncertainty")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True, help="new directory for the subset")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tcl.database import load_records
    from tcl.evaluation import load_checkpoint, record_targets
    from tcl.sampling import sample_offline

    records = load_records(args.data, profile=args.profile).measured()
    targets = record_targets(args.data, args.profile)
    model = load_checkpoint(args.model) if args.model is not None else None
    summary = sample_offline(records, args.sampler, args.budget, args.out, model=model, seed=args.seed,
                             target=targets[0] if targets else None)
    print(f"{args.sampler} chose {summary.selected} of {summary.pool} programs in {summary.tasks} tasks; "
          f"subset in {args.out}")
    return 0
