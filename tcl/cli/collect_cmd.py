"""``tcl collect``: measure candidate programs of networks' tasks on a hardware profile."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tcl.api import defaults
from tcl.api.validation import fraction, option, whole
from tcl.cli.common import add_budget_option, add_input_shape_option, add_seed_option, comma_list, input_shape
from tcl.cli.progress import RichReporter
from tcl.cli.sample_cmd import add_round_model_options, round_model_options


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "collect",
        help="measure candidate programs of networks on a profile",
        description="Extract the tasks of networks, build a candidate pool per task, and measure the candidates a "
        "sampler picks on a hardware profile. Records are TVM JSONDatabase files; rerunning the same "
        "command resumes where it stopped.",
    )
    parser.add_argument("--profile", required=True, help="hardware profile name (see tcl profiles)")
    parser.add_argument(
        "--network",
        required=True,
        help="comma-separated network names (see tcl plugins), TVM JSONDatabase directories or model files "
        "path/file.py:ClassName (as in tcl tune)",
    )
    add_input_shape_option(parser)
    parser.add_argument("--pool-size", type=option(whole), required=True, help="candidates generated per task")
    parser.add_argument("--out", type=Path, required=True, help="record directory to write (and resume)")
    parser.add_argument(
        "--sampler",
        default=defaults.MEASURE_ALL,
        help=f"which candidates to measure (default: {defaults.MEASURE_ALL})",
    )
    add_budget_option(parser, 1.0)
    parser.add_argument(
        "--pool",
        type=Path,
        default=None,
        help="pool directory to use or create, to measure the same pool on several profiles (default: OUT/pool)",
    )
    parser.add_argument(
        "--pool-model",
        type=Path,
        default=None,
        help="checkpoint guiding the evolutionary search that fills new pools after random sampling "
        "(default: none, unguided mutation)",
    )
    parser.add_argument(
        "--pool-random",
        type=option(fraction, float),
        default=None,
        help="largest share of a new pool drawn by random sampling, 0-1 (default: as many as it finds)",
    )
    add_seed_option(parser)
    parser.add_argument("--batch-size", type=option(whole), default=16, help="candidates built and run per batch")
    parser.add_argument(
        "--max-tasks",
        type=option(whole),
        default=None,
        help="only the first N tasks (round-robin over networks, most work first)",
    )
    parser.add_argument(
        "--include-simple-tasks", action="store_true", help="also tasks without a reduction (reshapes, elementwise)"
    )
    parser.add_argument(
        "--rounds",
        type=option(whole),
        default=1,
        help="spend the budget in R active-learning rounds, retraining --model between them",
    )
    parser.add_argument(
        "--idle-only",
        action="store_true",
        help="time a batch again, once the machine is idle, when other processes took the CPU meanwhile",
    )
    parser.add_argument(
        "--model",
        default=defaults.COST_MODEL,
        help=f"cost model trained between rounds (default {defaults.COST_MODEL})",
    )
    add_round_model_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tcl.api.profiles import get_profile
    from tcl.learning.collect import collect

    profile = get_profile(args.profile, args.profiles_dir)
    pool_model = None
    if args.pool_model is not None:
        from tcl.learning.evaluation import load_checkpoint

        pool_model = load_checkpoint(args.pool_model)
    stats = collect(
        profile=profile,
        network_names=comma_list(args.network),
        pool_size=args.pool_size,
        out_dir=args.out,
        sampler_name=args.sampler,
        budget=args.budget,
        pool_dir=args.pool,
        seed=args.seed,
        batch_size=args.batch_size,
        max_tasks=args.max_tasks,
        include_simple_tasks=args.include_simple_tasks,
        reporter=RichReporter(),
        rounds=args.rounds,
        model_name=args.model,
        model_options=round_model_options(args, args.model),
        pool_model=pool_model,
        pool_random=args.pool_random,
        idle_only=args.idle_only,
        input_shape=input_shape(args),
    )
    rate = stats.measured / stats.seconds if stats.seconds > 0 else 0.0
    print(
        f"measured {stats.measured} programs ({stats.failed} failed) in {stats.seconds:.1f} s "
        f"({rate:.2f} prog/s); {stats.skipped_done} were already measured; records in {args.out}"
    )
    if stats.retimed:
        print(f"{stats.retimed} programs were timed again because other processes took the CPU", file=sys.stderr)
    if stats.other_cpu:
        print(
            f"{stats.other_cpu} of them were timed again because another CPU model had timed them: "
            "a task's labels come from one CPU (docs/measurement.md)"
        )
    if stats.busy_measured:
        print(
            f"warning: {stats.busy_measured} of them were timed while other processes used up to "
            f"{stats.busy_cores:.1f} cores; for clean labels measure them again on an idle machine "
            "(docs/measurement.md, Noise)",
            file=sys.stderr,
        )
    return 0
