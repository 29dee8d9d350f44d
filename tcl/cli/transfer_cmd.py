"""``tcl transfer`` (carry a cost model to another platform's records) and ``tcl adapt``
(measure a small sample on this machine and distil the model into it)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tcl.api import defaults
from tcl.api.errors import TclError
from tcl.api.validation import number, option, whole
from tcl.cli.common import (
    add_budget_option,
    add_data_option,
    add_held_out_option,
    add_json_option,
    add_seed_option,
    add_threads_option,
    comma_list,
    print_json,
)


def _strategy_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--lam",
        type=option(number, float, inclusive=True),
        default=None,
        help="continual-kd: weight of the distillation term (default 2)",
    )
    parser.add_argument(
        "--tau", type=option(number, float), default=None, help="continual-kd: softmax temperature (default 4)"
    )
    parser.add_argument(
        "--distill-on",
        choices=("labelled", "pool"),
        default=None,
        help="continual-kd: distil on the labelled sample only (default), or also on unlabelled pool programs",
    )
    parser.add_argument("--epochs", type=option(whole), default=None, help="training epochs (default: the teacher's)")
    parser.add_argument(
        "--model",
        default=None,
        help="cost model family: a teacher of another is refused; scratch without a teacher builds it (default mamba)",
    )
    parser.add_argument("--featurizer", default=None, help="refuse a teacher trained on other features")
    add_budget_option(parser, 0.1)
    parser.add_argument(
        "--sampler", default=defaults.SAMPLER, help=f"which programs count as measured (default {defaults.SAMPLER})"
    )
    add_seed_option(parser)
    add_threads_option(parser)
    parser.add_argument("--out", type=Path, required=True, help="checkpoint directory to write")
    add_json_option(parser)


def add_parser(subparsers: Any) -> None:
    tr = subparsers.add_parser(
        "transfer",
        help="carry a cost model to another platform with a small sample of its records",
        description="Sample --budget of each task's records of PROFILE under DATA (the rest stays unlabelled), run "
        "a transfer strategy from the teacher checkpoint, save the new model and score it on the tasks "
        "of --held-out networks, on PROFILE and on the teacher's platforms (forgetting).",
    )
    tr.add_argument(
        "--strategy", required=True, help="continual-kd, continual-kd-pc, fine-tune, mtl, scratch, as-is, or a plugin's"
    )
    tr.add_argument("--teacher", type=Path, default=None, help="checkpoint of the earlier platform's model")
    tr.add_argument("--profile", required=True, help="profile of the new platform's records")
    add_data_option(tr)
    add_held_out_option(tr)
    tr.add_argument(
        "--sampler-uses-model",
        action="store_true",
        help="let the sampler use the teacher (RDU: its embedding and MC-dropout uncertainty; slow on CPU)",
    )
    _strategy_options(tr)
    tr.set_defaults(handler=run_transfer)

    ad = subparsers.add_parser(
        "adapt",
        help="measure ~10%% of a candidate pool here and distil a cost model into this machine",
        description="Pick --budget of each task's candidates in a pool with the sampler, measure them on PROFILE "
        "(resumable: a rerun measures only what is missing), and distil the teacher into a model for "
        "this machine with continual-kd.",
    )
    ad.add_argument("--profile", default="native", help="profile to measure on (default native: this machine)")
    ad.add_argument(
        "--teacher",
        type=Path,
        default=None,
        help="checkpoint to start from (default: the shipped x86-avx2 mamba model)",
    )
    ad.add_argument(
        "--pool",
        type=Path,
        default=None,
        help="candidate pool directory (default: the pool the installed network plugins ship)",
    )
    ad.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        help="where measurements are kept and resumed (default: OUT.work beside the checkpoint)",
    )
    ad.add_argument("--batch-size", type=option(whole), default=16, help="candidates built and run per batch")
    _strategy_options(ad)
    ad.set_defaults(handler=run_adapt)


def _options(args: argparse.Namespace) -> dict[str, Any]:
    names = ("lam", "tau", "distill_on", "epochs", "model", "featurizer")
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


def run_transfer(args: argparse.Namespace) -> int:
    from tcl.learning.transfer import transfer_once

    held_out = comma_list(args.held_out)
    result = transfer_once(
        strategy=args.strategy,
        teacher=args.teacher,
        profile=args.profile,
        data_dir=args.data,
        out=args.out,
        budget=args.budget,
        sampler=args.sampler,
        held_out=held_out,
        seed=args.seed,
        options=_options(args),
        threads=args.threads,
        sampler_uses_model=args.sampler_uses_model,
    )
    if args.json:
        print_json(result)
        return 0
    print(
        f"{args.strategy}: {result['programs_measured']} programs of {args.profile} used "
        f"({result['programs_trained']} trained on), {result['parameters']} parameters, "
        f"{result['train_s']:.1f} s; checkpoint in {args.out}"
    )
    for where, scores in [(args.profile, result["target"]), *result["earlier"].items()]:
        if scores:
            print(f"held-out {', '.join(held_out)} on {where}: top1 {scores['top1']:.4f} top5 {scores['top5']:.4f}")
    return 0


def default_teacher() -> Path:
    from tcl.tuning.pretrained import pretrained_dir

    path = pretrained_dir(defaults.TEACHER_PROFILE, defaults.COST_MODEL)
    if path is None or not (path / "config.json").is_file():
        raise TclError(
            f"no shipped pretrained {defaults.COST_MODEL} model for {defaults.TEACHER_PROFILE}; give --teacher CHECKPOINT"
        )
    return path


def run_adapt(args: argparse.Namespace) -> int:
    from tcl.api.profiles import get_profile
    from tcl.cli.progress import RichReporter
    from tcl.learning.transfer import adapt
    from tcl.tuning.pretrained import shipped_pool

    profile = get_profile(args.profile, args.profiles_dir)
    teacher = args.teacher if args.teacher is not None else default_teacher()
    pool = args.pool if args.pool is not None else shipped_pool()
    work_dir = args.work_dir if args.work_dir is not None else args.out.with_name(args.out.name + ".work")
    result = adapt(
        profile=profile,
        teacher=teacher,
        pool_dir=pool,
        out=args.out,
        work_dir=work_dir,
        budget=args.budget,
        sampler=args.sampler,
        options=_options(args),
        seed=args.seed,
        batch_size=args.batch_size,
        reporter=RichReporter(),
        threads=args.threads,
    )
    if args.json:
        print_json(result)
        return 0
    print(
        f"measured {result['measured_now']} programs now ({result['failed_now']} failed), "
        f"{result['already_measured']} were already measured; distilled {result['programs_measured']} programs "
        f"into {args.out} in {result['train_s']:.1f} s ({result['parameters']} parameters); "
        f"measurements in {work_dir}"
    )
    return 0
