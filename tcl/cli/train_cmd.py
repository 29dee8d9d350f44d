"""``tcl train`` and ``tcl eval``: fit a cost model on records, score one on records."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tcl.api.validation import fraction, option, whole
from tcl.cli.common import (
    add_data_option,
    add_feature_cache_option,
    add_held_out_option,
    add_json_option,
    add_key_value_option,
    add_seed_option,
    add_threads_option,
    comma_list,
    feature_cache_dir,
    option_dict,
    print_json,
    print_table,
)


def add_parser(subparsers: Any) -> None:
    train = subparsers.add_parser(
        "train",
        help="train a cost model on measured records",
        description="Train a cost model (see tcl plugins) on records under DATA (any tree of TVM "
        "JSONDatabases); the built-in torch models learn to rank programs within each task (loss option: "
        "LambdaRank by default). Tasks of --held-out networks are kept out for evaluation. The built-in "
        "torch models keep their state after each epoch in OUT.training-state.pt: interrupted, the same "
        "command goes on from the last finished epoch.",
    )
    train.add_argument("--model", required=True, help="cost model name: mlp, tlp, mamba, xgb, or a plugin's")
    add_data_option(train)
    train.add_argument("--profile", default=None, help="only records of this profile (needed when DATA holds several)")
    train.add_argument("--out", type=Path, required=True, help="checkpoint directory to write")
    add_held_out_option(train, split=True)
    train.add_argument(
        "--valid-fraction",
        type=option(fraction, float, one=False),
        default=0.1,
        help="fraction of training tasks for early stopping",
    )
    train.add_argument("--epochs", type=option(whole), default=None, help="training epochs (model default: 50)")
    train.add_argument("--batch-size", type=option(whole), default=None, help="programs per batch (model default: 512)")
    add_key_value_option(
        train,
        "--option",
        "another option of the cost model, e.g. --option lr=0.001; docs/cost-models.md lists each "
        "built-in model's options",
    )
    add_seed_option(train)
    add_threads_option(train)
    add_feature_cache_option(train)
    train.set_defaults(handler=run_train)

    ev = subparsers.add_parser(
        "eval",
        help="score a checkpoint on measured records",
        description="Top-1/Top-5 (pooled over tasks and per network) and pairwise accuracy of a checkpoint on "
        "records under DATA, e.g. a directory written by plain tvm tune_tir.",
    )
    ev.add_argument("--model", type=Path, required=True, help="checkpoint directory")
    add_data_option(ev)
    ev.add_argument("--profile", default=None, help="only records of this profile")
    only = ev.add_mutually_exclusive_group()
    only.add_argument(
        "--network", default="", help="comma-separated networks: only their tasks (e.g. the ones held out in training)"
    )
    only.add_argument(
        "--split", type=Path, default=None, metavar="FILE", help="only the tasks of a split file's test networks"
    )
    ev.add_argument(
        "--per-task",
        action="store_true",
        help="also each task's own Top-1, best latency and share of the pooled Top-1's shortfall",
    )
    add_feature_cache_option(ev)
    add_json_option(ev)
    ev.set_defaults(handler=run_eval)


def _model_options(args: argparse.Namespace) -> dict[str, Any]:
    options = option_dict(args.option, "--option")
    if args.epochs is not None:
        options["epochs"] = args.epochs
    if args.batch_size is not None:
        options["batch_size"] = args.batch_size
    # runtime hints: models that do not declare them do not get them
    options["threads"] = args.threads
    options["cache_dir"] = feature_cache_dir(args)
    return options


def training_state_file(out: Path) -> Path:
    """Where an interrupted ``tcl train --out OUT`` left its state: beside OUT, not in it (OUT is
    replaced whole when the checkpoint is written)."""
    return out.parent / f"{out.name}.training-state.pt"


def run_train(args: argparse.Namespace) -> int:
    from tcl.api import discovery
    from tcl.learning.evaluation import require_checkpoint_dir, score_records
    from tcl.learning.record_sets import clean_records, split_by_network, split_by_task
    from tcl.records.database import load_records
    from tcl.records.splits import load_split

    require_checkpoint_dir(args.out)
    state_file = training_state_file(args.out)
    options = _model_options(args)
    if discovery.names_parameter(discovery.registry().get("cost_models", args.model).factory, "state_file"):
        options["state_file"] = str(state_file)
    model = discovery.registry().create("cost_models", args.model, **options)
    split = load_split(args.split) if args.split is not None else None
    records = load_records(args.data, profile=args.profile)
    held_out = list(split.test) if split is not None else comma_list(args.held_out)
    train, held = split_by_network(records, held_out) if held_out else (records, None)
    # the held-out part keeps its failed programs, so it is scored as `tcl eval` scores it
    train, _ = clean_records(train)
    if split is not None and split.validation:
        train, valid = split_by_network(train, split.validation)
    else:
        train, valid = split_by_task(train, args.valid_fraction, seed=args.seed)
    fit_metrics = model.fit(train, valid if len(valid) else None, seed=args.seed)
    model.save(args.out)
    state_file.unlink(missing_ok=True)
    print(
        f"trained {args.model} on {len(train.tasks)} tasks ({len(train)} programs), validated on "
        f"{len(valid.tasks)} tasks; checkpoint in {args.out}"
    )
    if fit_metrics:
        print("fit: " + ", ".join(f"{k} {v:.4f}" for k, v in fit_metrics.items() if isinstance(v, float)))
    if held is not None and held.tasks:
        result = score_records(model, held)
        print(f"held-out networks {', '.join(held_out)}: " + _summary(result))
    return 0


def run_eval(args: argparse.Namespace) -> int:
    from tcl.api.profiles import get_profile
    from tcl.learning.evaluation import checkpoint_config, load_checkpoint, record_cpus, score_records
    from tcl.learning.record_sets import split_by_network
    from tcl.records.database import load_records
    from tcl.records.splits import load_split

    config = checkpoint_config(args.model)
    model = load_checkpoint(args.model, cache_dir=feature_cache_dir(args))
    networks = list(load_split(args.split).test) if args.split is not None else comma_list(args.network)
    records = load_records(args.data, profile=args.profile)
    if networks:
        _, records = split_by_network(records, networks)
    _warn_on_other_target(config, records.profile, record_cpus(args.data, args.profile), get_profile, args.profiles_dir)
    result = score_records(model, records, per_task=args.per_task, intervals=True)
    if args.json:
        print_json(
            {
                "model": str(args.model),
                "data": str(args.data),
                "pooling": "top-k pooled over tasks (TLP); *_per_network: mean over networks (TenSet)",
                **result,
            }
        )
        return 0
    tasks = result.pop("per_task", None)
    interval, chance = result.pop("interval"), result.pop("chance")
    rows = []
    for key, value in result.items():
        low_high = interval.get(key)
        rows.append(
            [
                key,
                f"{value:.4f}" if isinstance(value, float) else value,
                f"{low_high[0]:.4f} - {low_high[1]:.4f}" if low_high else "",
                f"{chance[key]:.4f}" if key in chance else "",
            ]
        )
    print_table(
        f"{config['model']} checkpoint {args.model} on {args.data}",
        ["metric", "value", "95% interval", "random pick"],
        rows,
    )
    if tasks:
        print_table(
            "per task, largest share of the pooled Top-1's shortfall first",
            ["task", "weight", "programs", "best ms", "top1", "shortfall share"],
            [
                [
                    t["task"],
                    f"{t['weight']:g}",
                    t["programs"],
                    f"{t['best_ms']:.4g}" if t["best_ms"] is not None else "-",
                    f"{t['top1']:.4f}" if t["top1"] is not None else "-",
                    f"{t['shortfall_share']:.3f}",
                ]
                for t in tasks
            ],
        )
        print(
            "top1 per task: best latency / latency of the model's pick; shortfall share: the task's part of "
            "what the pooled Top-1 lacks (weight x (pick - best), over all tasks)"
        )
    print(
        "top1/top5: pooled over tasks, weighted by task weight (TLP); *_per_network: mean over networks (TenSet); "
        "interval: 95% bootstrap over tasks; random pick: the expected score of a random ranking"
    )
    return 0


def _warn_on_other_target(config: dict, records_profile: str | None, cpus: set[str], get_profile, dirs) -> None:
    trained_on = config.get("profile")
    if not trained_on:
        return
    if records_profile and records_profile != trained_on:
        print(
            f"tcl: warning: the checkpoint was trained on profile {trained_on} but the records are of "
            f"{records_profile}; expect lower accuracy (see tcl transfer)",
            file=sys.stderr,
        )
        return
    try:
        expected = str(get_profile(trained_on, dirs).target.get("mcpu"))
    except Exception:  # noqa: BLE001 - an unknown profile only means we cannot compare
        return
    other = sorted(c for c in cpus if c != expected)
    if other:
        print(
            f"tcl: warning: the checkpoint was trained on profile {trained_on} (mcpu {expected}) but the "
            f"records were measured for mcpu {', '.join(other)}; expect lower accuracy",
            file=sys.stderr,
        )


def _summary(result: dict) -> str:
    return ", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in result.items())
