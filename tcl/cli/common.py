"""Shared CLI pieces: the one-line error parser, the options several commands take, JSON/table output."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, NoReturn, Sequence

from tcl.api.errors import TclError
from tcl.api.validation import budget, option, whole


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line (exit 2) instead of the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


# Options that several commands take, defined once so that each has one spelling, type,
# default and meaning everywhere.

_BUDGET = option(budget, float)
_WHOLE = option(whole)


def add_data_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, required=True, help="record directory (searched recursively)")


def add_held_out_option(parser: argparse.ArgumentParser, *, split: bool = False) -> None:
    """``--held-out NETWORKS``; with ``split``, or ``--split FILE`` (its test networks held
    out, its validation networks used for early stopping)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--held-out", default="", metavar="NETWORKS", help="comma-separated networks kept out of training and scored on"
    )
    if not split:
        return
    group.add_argument(
        "--split",
        type=Path,
        default=None,
        metavar="FILE",
        help="a split file (data/split.toml): score on its test networks, stop early on its validation "
        "networks, train on the rest",
    )


def add_budget_option(parser: argparse.ArgumentParser, default: float) -> None:
    parser.add_argument(
        "--budget",
        type=_BUDGET,
        default=default,
        help=f"per task: a fraction of the programs (0-1) or a whole count (default {default:g})",
    )


def add_seed_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")


def add_threads_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", type=_WHOLE, default=1, help="torch threads for training (default 1)")


def add_feature_cache_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-feature-cache",
        action="store_true",
        help="featurize afresh, neither reading nor filling the feature cache (tcl cache shows it; "
        "TCL_CACHE_DIR moves it)",
    )


def feature_cache_dir(args: argparse.Namespace) -> str | None:
    """The feature cache a command's models use, or None under ``--no-feature-cache``."""
    from tcl.records.feature_cache import default_cache_dir

    return None if args.no_feature_cache else str(default_cache_dir())


def add_input_shape_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input-shape",
        default=None,
        help="input shape of a network given as path/file.py:ClassName, e.g. 1,3,32,32 (fed torch.randn of "
        "it; not needed when the class has an example_inputs() method)",
    )


def input_shape(args: argparse.Namespace) -> tuple[int, ...] | None:
    """``--input-shape`` as integers, or None when not given."""
    from tcl.measurement.networks import parse_shape

    return parse_shape(args.input_shape) if args.input_shape else None


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")


def key_value(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` as ``(key, value)``, the value read as JSON when it parses (``w_u=0`` gives
    0, ``lr=1e-3`` a float), else kept as text (``mode=pool``)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip().isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE with KEY a name, got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except ValueError:
        return key.strip(), value


def add_key_value_option(parser: argparse.ArgumentParser, flag: str, help: str) -> None:
    """A repeatable ``flag KEY=VALUE`` option (read by :func:`key_value`)."""
    parser.add_argument(
        flag,
        action="append",
        default=[],
        type=key_value,
        metavar="KEY=VALUE",
        help=f"{help} (repeatable; VALUE is read as JSON when it parses, else as text)",
    )


def option_dict(pairs: Sequence[tuple[str, Any]], flag: str) -> dict[str, Any]:
    """The ``(key, value)`` pairs of a repeatable option as a dict; a key given twice is refused."""
    options: dict[str, Any] = {}
    for key, value in pairs:
        if key in options:
            raise TclError(f"{flag} {key} is given twice")
        options[key] = value
    return options


def comma_list(text: str) -> list[str]:
    """The names of a comma-separated option (``a,b, c``), blanks and surrounding spaces dropped."""
    return [name.strip() for name in text.split(",") if name.strip()]


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(show_lines=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    # piped output has no terminal width; rich would wrap at 80 columns and split cells
    console = Console(width=None if sys.stdout.isatty() else 160)
    console.print(title, highlight=False, markup=False)  # above the table: a table's title wraps to its width
    console.print(table)


def fail(message: str) -> NoReturn:
    raise TclError(message)
