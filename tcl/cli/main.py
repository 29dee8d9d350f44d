"""The ``tcl`` command. Every user-facing error is one line on stderr and exit status 2; an
unexpected exception (a bug, ours or a plugin's) is one line naming where it was raised and
exit status 1, with the traceback when ``TCL_TRACEBACK=1``."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Sequence

from tcl import __version__
from tcl.api.discovery import crash_origin
from tcl.api.errors import TclError, one_line
from tcl.cli import (
    cache_cmd,
    collect_cmd,
    dataset_cmd,
    plugins_cmd,
    profiles_cmd,
    quickstart_cmd,
    run_cmd,
    sample_cmd,
    train_cmd,
    transfer_cmd,
    tune_cmd,
)
from tcl.cli.common import Parser

TRACEBACK_ENV = "TCL_TRACEBACK"

COMMANDS = (
    quickstart_cmd,
    plugins_cmd,
    profiles_cmd,
    collect_cmd,
    dataset_cmd,
    sample_cmd,
    train_cmd,
    tune_cmd,
    transfer_cmd,
    run_cmd,
    cache_cmd,
)


def build_parser() -> Parser:
    parser = Parser(prog="tcl", description="TCL: fast cross-hardware tensor program tuning on TVM MetaSchedule.")
    parser.add_argument("--version", action="version", version=f"tcl {__version__}")
    _add_profiles_dir(parser, [])
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=Parser)
    for command in COMMANDS:
        command.add_parser(subparsers)
    for command in subparsers.choices.values():  # also after the command: `tcl profiles --profiles-dir D`
        _add_profiles_dir(command, argparse.SUPPRESS)
    return parser


def _add_profiles_dir(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument(
        "--profiles-dir",
        action="append",
        default=default,
        metavar="DIR",
        help="extra directory of hardware profile TOML files (repeatable)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "handler"):
        parser.print_help()
        return 2
    try:
        return args.handler(args)
    except TclError as exc:
        print(f"tcl: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into head or similar
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("tcl: interrupted; finished work is saved, run the same command again to resume", file=sys.stderr)
        return 130
    except Exception as exc:
        if os.environ.get(TRACEBACK_ENV, "").strip() not in ("", "0"):
            raise
        print(
            f"tcl: unexpected error: {type(exc).__name__}: {one_line(exc)} (raised at {crash_origin(exc)}); "
            f"set {TRACEBACK_ENV}=1 to see the traceback",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
