"""``tcl profiles``: the hardware profiles found, with their resolved TVM targets."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tcl.api.discovery import registry
from tcl.api.profiles import load_profiles
from tcl.cli.common import add_json_option, print_json, print_table


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "profiles",
        help="list hardware profiles",
        description="List built-in and user hardware profiles (user ones come from "
        "--profiles-dir and TCL_PROFILES_PATH).",
    )
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    profiles = load_profiles(args.profiles_dir)
    installed = set(registry().names("hardware_backends"))
    if args.json:
        print_json(
            {"profiles": [{**p.as_dict(), "backend_installed": p.backend in installed} for p in profiles.values()]}
        )
        return 0
    print_table(
        "hardware profiles",
        ["name", "backend", "threads", "target", "description"],
        [
            [
                p.name,
                p.backend if p.backend in installed else f"{p.backend} (not installed)",
                p.runtime_threads,
                _compact(p.target),
                p.description,
            ]
            for p in profiles.values()
        ],
    )
    missing = sorted(p.name for p in profiles.values() if p.backend not in installed)
    if missing:
        print(
            f"tcl: warning: no installed plugin provides the backend of {', '.join(missing)}; "
            f"installed backends: {', '.join(sorted(installed))}",
            file=sys.stderr,
        )
    return 0


def _compact(target: dict[str, Any]) -> str:
    """``llvm mcpu=core-avx2 num-cores=2``: the table's short form of a target dict."""
    parts = [str(target.get("kind"))]
    for key, value in target.items():
        if key != "kind":
            parts.append(f"{key}=({_compact(value)})" if isinstance(value, dict) else f"{key}={value}")
    return " ".join(parts)
