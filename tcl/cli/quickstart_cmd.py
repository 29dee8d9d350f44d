"""``tcl quickstart``: the whole TCL loop on this machine, on embedded defaults, in minutes.

Plugins found → the shipped mamba model → RDU-choose and measure a small share of one small
network's candidate programs here → distil the model to this machine (continual KD) → tune
that network with it and with TVM's XGBoost for the same trial budget → one table and a plot.
Every step keeps its files under ``--out``; running it again reuses what is done.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from tcl.api import defaults
from tcl.api.errors import TclError
from tcl.api.validation import budget, option, whole
from tcl.cli.common import add_json_option, add_seed_option, print_json, print_table

SUMMARY_FILE = "quickstart.json"


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "quickstart",
        help="measure, distil and tune one small network on this machine (a few minutes)",
        description="Show the plugins, load the shipped mamba model, RDU-sample and measure a small share of "
        "NETWORK's candidate programs on PROFILE, distil the model to this machine, then tune "
        "NETWORK with it and with TVM's XGBoost for the same number of trials.",
    )
    parser.add_argument("--out", type=Path, default=Path("runs/quickstart"), help="working directory (resumable)")
    parser.add_argument("--profile", default="native", help="hardware profile of this machine (default native)")
    parser.add_argument(
        "--network", default=defaults.QUICKSTART_NETWORK, help="network whose tasks are sampled and tuned"
    )
    parser.add_argument(
        "--budget", type=option(budget, float), default=0.1, help="share of each task's pool to measure (0.1)"
    )
    parser.add_argument("--trials", type=option(whole), default=32, help="measured trials per tuning method (32)")
    parser.add_argument(
        "--population",
        type=option(whole),
        default=128,
        help="evolutionary search population per round (MetaSchedule's default is 512; smaller is "
        "faster on a small machine)",
    )
    parser.add_argument("--teacher", type=Path, default=None, help="checkpoint to start from (the shipped mamba)")
    parser.add_argument(
        "--pool", type=Path, default=None, help="candidate pool (default: the one shipped with the network)"
    )
    add_seed_option(parser)
    add_json_option(parser)
    parser.set_defaults(handler=run)


def network_pool(pool_dir: Path, network: str, out_dir: Path) -> Path:
    """The tasks of ``network`` in the pool at ``pool_dir``, saved as their own pool."""
    from tcl.records.pools import Pool, is_pool, load_pool, save_pool

    if is_pool(out_dir):
        return out_dir
    pool = load_pool(pool_dir)
    subset = Pool(meta={k: v for k, v in pool.meta.items() if k not in ("tasks", "networks")})
    for task, traces in pool:
        if network in task.networks:
            subset.add(task, traces)
    if not len(subset):
        known = sorted({n for task in pool.tasks.values() for n in task.networks})
        raise TclError(f"the pool {pool_dir} has no tasks of {network}; its networks: {', '.join(known)}")
    save_pool(out_dir, subset, meta=subset.meta)
    return out_dir


def plugin_rows() -> list[list[Any]]:
    from tcl.api import discovery

    registry = discovery.registry()
    kinds = ("samplers", "cost_models", "transfer_strategies", "hardware_backends", "featurizers", "networks")
    return [[kind, ", ".join(registry.names(kind))] for kind in kinds]


def run(args: argparse.Namespace) -> int:
    from tcl.api import discovery
    from tcl.api.profiles import get_profile
    from tcl.cli.progress import RichReporter
    from tcl.cli.transfer_cmd import default_teacher
    from tcl.learning.transfer import adapt
    from tcl.records.stored_files import write_atomic
    from tcl.tuning.compare import compare
    from tcl.tuning.pretrained import shipped_pool

    if args.trials < 1:
        raise TclError(f"--trials must be at least 1, got {args.trials}")
    started = time.perf_counter()
    discovery.registry().get("networks", args.network)  # an unknown name fails before any work
    profile = get_profile(args.profile, args.profiles_dir)
    teacher = args.teacher if args.teacher is not None else default_teacher()
    print_table("1. plugins found", ["kind", "names"], plugin_rows())

    print(f"2. model: {teacher}")
    pool = network_pool(
        args.pool if args.pool is not None else shipped_pool(args.network), args.network, args.out / "pool"
    )
    print(f"3-4. measuring {args.budget:g} of {args.network}'s candidates on {profile.name} and distilling")
    adapted = adapt(
        profile=profile,
        teacher=teacher,
        pool_dir=pool,
        out=args.out / "tcl-mamba",
        work_dir=args.out / "adapt",
        budget=args.budget,
        seed=args.seed,
        reporter=RichReporter(),
    )
    print(f"   measured {adapted['programs_measured']} programs, distilled in {adapted['train_s']:.1f} s")

    print(f"5. tuning {args.network}: distilled model vs TVM's XGBoost, {args.trials} trials each")
    comparison = compare(
        ["xgb", str(args.out / "tcl-mamba")],
        args.network,
        profile,
        args.trials,
        args.out / "tune",
        seed=args.seed,
        population=args.population,
    )
    summary = {
        "profile": profile.name,
        "network": args.network,
        "teacher": str(teacher),
        "adapt": adapted,
        "tuning": comparison,
        "seconds": round(time.perf_counter() - started, 1),
    }
    write_atomic(args.out / SUMMARY_FILE, _json(summary))
    if args.json:
        print_json(summary)
        return 0
    columns, rows = closing_table(comparison["rows"])
    print_table(f"{args.network} on {profile.name}: tuned outputs checked against torch", columns, rows)
    print(what_it_showed(comparison["rows"]))
    print(
        f"plot: {args.out / 'tune' / 'compare.png'}; summary: {args.out / SUMMARY_FILE}; took {summary['seconds']:.0f} s"
    )
    return 0


def closing_table(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The closing table: short headers, so it fits a 100-column terminal."""
    columns = ["method", "trials", "tune s", "to xgb best s", "net ms", "torch ms", "torch/net", "xgb/net"]
    return columns, [
        [
            r["method"],
            str(r["measured_trials"]),
            _fmt(r["tuning_s"]),
            _fmt(r["time_to_baseline_best_s"]),
            _fmt(r["latency_ms"], 3),
            _fmt(r["torch_ms"], 3),
            _fmt(r["vs_torch"], 2),
            _fmt(r["latency_vs_baseline"], 2),
        ]
        for r in rows
    ]


def what_it_showed(rows: list[dict[str, Any]]) -> str:
    """One sentence: did the distilled model reach XGB's best sooner, and how fast is its network."""
    xgb, ours = rows[0], rows[-1]
    reached = ours["time_to_baseline_best_s"]
    if reached is None:
        search = f"{ours['method']} did not reach XGB's best estimate in {ours['measured_trials']} trials"
    else:
        search = (
            f"{ours['method']} reached XGB's best estimate after {reached:.0f} s, XGB after "
            f"{xgb['time_to_baseline_best_s']:.0f} s ({xgb['time_to_baseline_best_s'] / reached:.2f}x sooner)"
        )
    return (
        f"In short: {search}; its network runs in {ours['latency_ms']:.3f} ms against XGB's "
        f"{xgb['latency_ms']:.3f} ms and torch eager's {ours['torch_ms']:.3f} ms."
    )


def _fmt(value: Any, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _json(data: Any) -> str:
    import json

    return json.dumps(data, indent=2, default=str) + "\n"
