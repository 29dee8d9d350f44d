"""``tcl tune``: tune a network with MetaSchedule and one of our cost models (or TVM's), or
compare several (``--compare``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tcl.api import defaults
from tcl.api.validation import option, whole
from tcl.cli.common import (
    add_input_shape_option,
    add_json_option,
    add_seed_option,
    comma_list,
    input_shape,
    print_json,
    print_table,
)


def add_parser(subparsers: Any) -> None:
    tune = subparsers.add_parser(
        "tune",
        help="tune a network end to end with a cost model",
        description="Extract the network's tasks, tune them with MetaSchedule's task scheduler and evolutionary "
        "search guided by COST_MODEL, compile the network with the best schedules, check its output "
        "against torch and time both. Records go to OUT (a TVM JSONDatabase); rerunning the same "
        "command continues from them.",
    )
    tune.add_argument(
        "--network",
        required=True,
        help="registered network (see tcl plugins) or a model file path/file.py:ClassName (the class built "
        "without arguments; needs --input-shape unless it has an example_inputs() method returning its inputs)",
    )
    add_input_shape_option(tune)
    tune.add_argument("--profile", required=True, help="hardware profile (see tcl profiles)")
    tune.add_argument(
        "--cost-model",
        default=None,
        help="checkpoint directory, xgb or random (TVM's own), or a model name with a pretrained checkpoint",
    )
    tune.add_argument(
        "--compare",
        default=None,
        help="comma-separated methods (as --cost-model) tuned one after another and compared with the first",
    )
    tune.add_argument(
        "--trials", type=option(whole, minimum=0), required=True, help="measured candidates in total, over all tasks"
    )
    tune.add_argument(
        "--trials-per-round",
        type=option(whole),
        default=None,
        help="candidates measured per round (default: about two rounds per task, 4..64)",
    )
    tune.add_argument(
        "--population",
        type=option(whole),
        default=512,
        help="evolutionary search population (MetaSchedule's default 512; smaller is faster per round)",
    )
    tune.add_argument("--online", action="store_true", help="fine-tune our model on the measurements as they come")
    tune.add_argument("--out", type=Path, required=True, help="output directory (records, curve, result)")
    add_seed_option(tune)
    tune.add_argument("--repeats", type=option(whole), default=20, help="timing repeats of the final network (median)")
    tune.add_argument(
        "--baseline",
        default=None,
        help="with --compare: the method (as given, or its label) the others are compared with (default: the first)",
    )
    tune.add_argument(
        "--export",
        type=Path,
        default=None,
        help="with --cost-model: write the compiled network to this .so library (docs/tuning.md shows "
        "how to load and run it with TVM's runtime)",
    )
    tune.add_argument(
        "--torch-compile",
        action="store_true",
        help="also time the network under torch.compile (inductor) beside torch eager; compiling takes a minute or more",
    )
    tune.add_argument(
        "--race",
        type=option(whole),
        metavar="K",
        default=defaults.RACE_RECORDS,
        help="race each task's best K records inside the compiled network and keep the picks when the "
        f"network gets faster (1: no race; default {defaults.RACE_RECORDS})",
    )
    add_json_option(tune)
    tune.set_defaults(handler=run_tune)


def run_tune(args: argparse.Namespace) -> int:
    from tcl.api.errors import TclError
    from tcl.tuning.compare import compare
    from tcl.tuning.tune import tune_network

    if (args.cost_model is None) == (args.compare is None):
        raise TclError("give exactly one of --cost-model and --compare")
    if args.export is not None and args.compare is not None:
        raise TclError("--export needs --cost-model (one tuned network), not --compare")
    if args.baseline is not None and args.compare is None:
        raise TclError("--baseline needs --compare")
    shape = input_shape(args)
    common = dict(
        seed=args.seed,
        input_shape=shape,
        trials_per_round=args.trials_per_round,
        population=args.population,
        repeats=args.repeats,
        profiles_dir=args.profiles_dir,
        torch_compile=args.torch_compile,
        race=args.race,
    )
    if args.compare is not None:
        methods = comma_list(args.compare)
        summary = compare(
            methods,
            args.network,
            args.profile,
            args.trials,
            args.out,
            online=args.online,
            baseline=args.baseline,
            **common,
        )
        if args.json:
            print_json(summary)
            return 0
        columns = {
            "method": "method",
            "measured_trials": "trials",
            "tuning_s": "tune s",
            "estimate_ms": "est ms",
            "latency_ms": "e2e ms",
            "torch_ms": "torch ms",
            "vs_torch": "x torch",
            **({"vs_torch_compile": "x torch.compile"} if args.torch_compile else {}),
            "time_to_baseline_best_s": "s to base",
            "trials_to_baseline_best": "trials to base",
            "search_speedup": "speedup",
            "latency_vs_baseline": "e2e vs base",
            "cost_model_s": "model s",
            "rounds_under_load": "loaded rounds",
            "race_gain": "race gain",
        }
        print_table(
            f"{summary['network']} on {summary['profile']}, {summary['trials']} trials; baseline {summary['baseline']}",
            list(columns.values()),
            [[_fmt(row[c]) for c in columns] for row in summary["rows"]],
        )
        print(
            "est: sum of task weight x best task latency; s/trials to base: to reach the baseline's final est; "
            "speedup: baseline's time to its best / ours; e2e vs base: baseline e2e / ours; model s: of tune s, "
            "in the cost model's predict and update; loaded rounds: measured while other processes took the CPU; "
            "race gain: network with the best records / with the raced picks (1: best records kept)"
        )
        if args.torch_compile:
            print(torch_compile_line(summary.get("torch_compile_ms"), summary.get("torch_compile_error")))
        labels = [row["method"] for row in summary["rows"]]
        print_table(
            "seconds to reach each method's final estimate (-: never)",
            ["method", *labels],
            [[row["method"], *(_fmt(row["seconds_to_best_of"][other]) for other in labels)] for row in summary["rows"]],
        )
        print(f"curves: {args.out / 'compare.png'}; all numbers: {args.out / 'compare.json'}")
        _warn_load({row["method"]: row["rounds_under_load"] for row in summary["rows"]})
        return 0
    result = tune_network(
        args.network,
        args.profile,
        args.cost_model,
        args.trials,
        args.out,
        online=args.online,
        export=args.export,
        **common,
    )
    if args.json:
        print_json(result)
        return 0
    speedup = result["torch_latency_s"] / result["latency_s"]
    print(
        f"{result['network']} on {result['profile']} with {result['method']}: {result['measured_trials']} trials "
        f"in {result['tuning_s']:.0f}s; latency {result['latency_s'] * 1e3:.4f} ms (median of {args.repeats}), "
        f"torch eager {result['torch_latency_s'] * 1e3:.4f} ms ({speedup:.2f}x torch); "
        f"task-weighted estimate {_fmt(result['estimate_s'] and result['estimate_s'] * 1e3)} ms; "
        f"output matches torch (max rel. error {result['max_rel_error']:.2g})"
    )
    if args.torch_compile:
        ms = result.get("torch_compile_latency_s")
        print(torch_compile_line(ms and ms * 1e3, result.get("torch_compile_error"), result["latency_s"] * 1e3))
    print(functions_line(result))
    if result["race"] and result["race"]["tasks"]:  # none raced when no task has measured records
        print(race_line(result["race"]))
    print(f"records, curve and plot in {args.out}" + (f"; compiled library {args.export}" if args.export else ""))
    _warn_load({result["method"]: result["rounds_under_load"]})
    return 0


def torch_compile_line(ms: float | None, error: str | None, ours_ms: float | None = None) -> str:
    """What torch.compile (inductor) made of the network, or why it could not."""
    if ms is None:
        return f"torch.compile: failed ({error})"
    versus = f" ({ms / ours_ms:.2f}x torch.compile)" if ours_ms else ""
    return f"torch.compile (inductor) {ms:.4f} ms{versus}"


def functions_line(result: dict[str, Any]) -> str:
    """How many of the compiled network's functions got a tuned schedule, a default one, none."""
    return (
        f"functions: {len(result['tuned_functions'])} tuned, {len(result['model_chosen_functions'])} chosen by "
        f"the model unmeasured, {len(result['default_functions'])} default schedule, "
        f"{len(result['unscheduled_functions'])} unscheduled"
    )


def race_line(race: dict[str, Any]) -> str:
    """What racing each task's best records inside the network did."""
    head = f"race of each task's {race['k']} best records inside the network ({race['race_s']:.0f}s): "
    if not race["changed_tasks"]:
        return head + f"each of the {race['tasks']} tasks ran fastest with its best record"
    verdict = "kept the picks" if race["kept"] else "kept the best records"
    return (
        head + f"{race['changed_tasks']} of {race['tasks']} tasks ran faster with another record; network "
        f"{race['best_records_s'] * 1e3:.4f} ms with the best records, {race['raced_s'] * 1e3:.4f} ms with "
        f"the picks: {verdict}"
    )


def _warn_load(rounds_under_load: dict[str, int]) -> None:
    busy = {method: n for method, n in rounds_under_load.items() if n}
    if busy:
        where = ", ".join(f"{n} of {method}'s" for method, n in busy.items())
        print(
            f"warning: other processes took the CPU in {where} tuning rounds; their timings and tuning times are "
            "suspect (docs/measurement.md, Noise)",
            file=sys.stderr,
        )


def _fmt(value: Any) -> Any:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else value
