"""``tcl run CONFIG.toml``: run an experiment described by a config file."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run an experiment from a TOML config (configs/*.toml)",
        description="Run the experiment a TOML config describes ([experiment] kind = sampling, models, ...). "
        "Names of samplers and cost models are checked before any work. OUT gets "
        "config.resolved.json, results.json and results.png; paths in the config are relative to the config file's folder.",
    )
    parser.add_argument("config", type=Path, help="experiment config (TOML)")
    parser.add_argument("--out", type=Path, default=None, help="output directory (default: runs/<config name>)")
    parser.add_argument("--check", action="store_true", help="only validate the config")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tcl.api import discovery
    from tcl.experiments import prepare, run_config

    registry = discovery.registry()
    if args.check:
        prepare(args.config, registry)
        print(f"{args.config}: ok")
        return 0
    out = args.out or Path("runs") / args.config.stem
    results = run_config(
        args.config, out, registry=registry, progress=lambda line: print(line, file=sys.stderr, flush=True)
    )
    print_rows(results.get("title", str(args.config)), results["rows"])
    if results.get("forgetting"):
        print_rows("accuracy kept on each earlier platform", results["forgetting"])
    print(f"results in {out}/results.json, results.png, config.resolved.json")
    return 0


def print_rows(title: str, rows: list[dict[str, Any]]) -> None:
    """The rows as a table, ``x``, ``x_std`` and ``x_low``/``x_high`` shown as one
    ``mean ± std [low, high]`` column; wide
    enough not to wrap when written to a file."""
    from rich.console import Console
    from rich.table import Table

    columns = [k for k in dict.fromkeys(k for row in rows for k in row) if not k.endswith(("_std", "_low", "_high"))]
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column)
    for row in rows:
        single = row.get("seeds") == 1  # a spread over one seed is no information
        table.add_row(
            *(
                _cell(row.get(c), None if single else row.get(f"{c}_std"), row.get(f"{c}_low"), row.get(f"{c}_high"))
                for c in columns
            )
        )
    console = Console()
    Console(width=max(console.width, 200) if not console.is_terminal else None).print(table)


def _cell(value: Any, std: Any = None, low: Any = None, high: Any = None) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        text = f"{value:.0f}" if value.is_integer() and abs(value) >= 10 else f"{value:.4f}"  # counts stay counts
        if std is not None:
            text += f" ± {std:.4f}"
        if low is not None and high is not None:
            text += f" [{low:.3f}, {high:.3f}]"
        return text
    return "" if value is None else str(value)
