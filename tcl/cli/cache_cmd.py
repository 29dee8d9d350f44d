"""``tcl cache``: where the feature cache is, how big, and clearing it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tcl.cli.common import add_json_option, print_json


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "cache",
        help="show the feature cache's location and size, or clear it",
        description="Cost models keep computed program features on disk so that a second training run on the "
        "same records skips featurizing. The cache lives in $TCL_CACHE_DIR/features, else "
        "$XDG_CACHE_HOME/tcl/features, else ~/.cache/tcl/features; the least recently used files "
        "are deleted once it passes $TCL_CACHE_MAX_MB megabytes (default 1024, 0: no cap).",
    )
    _dir_option(parser, None)
    add_json_option(parser)
    parser.set_defaults(handler=run_show)
    actions = parser.add_subparsers(title="actions", metavar="ACTION", parser_class=type(parser))
    clear = actions.add_parser(
        "clear",
        help="delete every file of the feature cache",
        description="Delete the feature cache's files (only those it wrote).",
    )
    _dir_option(clear, argparse.SUPPRESS)  # `tcl cache --dir D clear` keeps D
    clear.set_defaults(handler=run_clear)


def _dir_option(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument(
        "--dir",
        type=Path,
        default=default,
        help="cache directory (default: the one cost models use; `tcl cache` shows it)",
    )


def _cache_dir(args: argparse.Namespace) -> Path:
    from tcl.records.feature_cache import default_cache_dir

    return args.dir.expanduser() if args.dir is not None else default_cache_dir()


def run_show(args: argparse.Namespace) -> int:
    from tcl.records.feature_cache import cache_usage, max_cache_bytes

    root = _cache_dir(args)
    files, size = cache_usage(root)
    cap = max_cache_bytes()
    if args.json:
        print_json({"dir": str(root), "files": files, "bytes": size, "max_bytes": cap})
        return 0
    print(f"feature cache: {root}")
    print(f"{files} files, {_mb(size)}; cap {'none' if cap is None else _mb(cap)} (TCL_CACHE_MAX_MB)")
    return 0


def run_clear(args: argparse.Namespace) -> int:
    from tcl.records.feature_cache import clear

    root = _cache_dir(args)
    files, size = clear(root)
    print(f"deleted {files} files ({_mb(size)}) from {root}")
    return 0


def _mb(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MB"
