"""``tcl sample``: choose a subset of measured records with a sampler (offline)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tcl.api.validation import option, whole
from tcl.cli.common import (
    add_budget_option,
    add_data_option,
    add_key_value_option,
    add_seed_option,
    add_threads_option,
    option_dict,
)


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "sample",
        help="choose a subset of measured records with a sampler (offline)",
        description="Per task, choose --budget of the measured programs under DATA with a sampler and write them "
        "to OUT as a TVM JSONDatabase, to study samplers without measuring again. With "
        "--rounds R the budget is spent in R active-learning rounds: after each round a --model is "
        "trained on the recorded latencies of what was chosen and guides the next round. "
        "(Online sampling while measuring: tcl collect --sampler S --budget F.)",
    )
    parser.add_argument("--sampler", required=True, help="sampler name: rdu, rdu-r, rdu-d, rdu-u, random, all, ...")
    add_key_value_option(
        parser,
        "--sampler-option",
        "an option of the sampler, e.g. --sampler rdu --sampler-option w_u=0 for RDU without uncertainty",
    )
    add_budget_option(parser, 0.1)
    add_data_option(parser)
    parser.add_argument("--profile", default=None, help="only records of this profile")
    parser.add_argument(
        "--model",
        default=None,
        help="a checkpoint directory (gives embeddings and uncertainty from round 1; its model kind "
        "is retrained between rounds) or a cost model name trained between rounds",
    )
    parser.add_argument("--rounds", type=option(whole), default=1, help="active-learning rounds (default 1)")
    add_round_model_options(parser)
    add_threads_option(parser)
    add_seed_option(parser)
    parser.add_argument("--out", type=Path, required=True, help="new directory for the subset")
    parser.set_defaults(handler=run)


def add_round_model_options(parser: argparse.ArgumentParser) -> None:
    """``--epochs`` and ``--model-option``: how the model trained between rounds is set up."""
    parser.add_argument(
        "--epochs", type=option(whole), default=None, help="training epochs between rounds (model default)"
    )
    add_key_value_option(
        parser,
        "--model-option",
        "another option of the model trained between rounds, e.g. --model-option layers=1 (as tcl train's --option)",
    )


def round_model_options(args: argparse.Namespace, name: str, threads: int = 1) -> dict[str, Any]:
    """Options of the model trained between rounds: ``--model-option``s, ``--epochs``, quiet, and
    ``threads`` (a runtime hint, passed only to a factory that declares it). The model is built
    once here, so that an option it refuses stops the command before round 1 measures anything."""
    from tcl.api import discovery

    options = {"verbose": False, **option_dict(args.model_option, "--model-option"), "threads": threads}
    if args.epochs is not None:
        options["epochs"] = args.epochs
    discovery.registry().create("cost_models", name, **options)
    return options


def round_model(args: argparse.Namespace) -> tuple[Any, str | None, dict[str, Any]]:
    """(round-1 model, model name trained between rounds, its options) from ``--model``."""
    from tcl.learning.evaluation import checkpoint_config, load_checkpoint

    spec = args.model
    if spec is None:
        return None, None, {}
    if Path(spec).is_dir():
        model, name = load_checkpoint(Path(spec)), checkpoint_config(Path(spec))["model"]
    else:
        model, name = None, spec  # round_model_options refuses an unknown name
    return model, name, round_model_options(args, name, args.threads)


def run(args: argparse.Namespace) -> int:
    from tcl.learning.evaluation import record_targets
    from tcl.learning.sampling import sample_offline
    from tcl.records.database import load_records

    model, name, options = round_model(args)
    records = load_records(args.data, profile=args.profile).measured()
    targets = record_targets(args.data, args.profile)
    summary = sample_offline(
        records,
        args.sampler,
        args.budget,
        args.out,
        model=model,
        seed=args.seed,
        sampler_options=option_dict(args.sampler_option, "--sampler-option"),
        target=targets[0] if targets else None,
        rounds=args.rounds,
        model_name=name if args.rounds > 1 else None,
        model_options=options,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
    )
    print(
        f"{args.sampler} chose {summary.selected} of {summary.pool} programs in {summary.tasks} tasks"
        f"{f' in {args.rounds} rounds' if args.rounds > 1 else ''}; subset in {args.out}"
    )
    return 0
