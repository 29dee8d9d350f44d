"""``tcl plugins``: what every extension point offers, and which plugins failed to load."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tcl.api.discovery import EXTENSION_POINTS, load_registry
from tcl.cli.common import add_json_option, print_json, print_table


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "plugins",
        help="list plugins by extension point",
        description="List every extension point, its plugins and their providers, and plugins that failed to load.",
    )
    add_json_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    registry = load_registry()
    points = {
        point: [
            {
                "name": name,
                "description": provided.record.description,
                "distribution": provided.distribution,
                "plugin": provided.plugin,
                "requires": provided.record.requirements(),
            }
            for name, provided in sorted(registry.entries[point].items())
        ]
        for point in EXTENSION_POINTS
    }
    failed = [{"plugin": f.plugin, "distribution": f.distribution, "error": f.error} for f in registry.failed]
    unknown = [{"plugin": f.plugin, "distribution": f.distribution, "warning": f.error} for f in registry.unknown_hooks]
    for item in unknown:
        print(f"tcl: warning: plugin {item['plugin']} ({item['distribution']}) {item['warning']}", file=sys.stderr)
    if args.json:
        print_json({"extension_points": points, "failed": failed, "unknown_hooks": unknown})
        return 0
    for point, items in points.items():
        print_table(
            point.replace("_", " "),
            ["name", "provider", "description", "requires"],
            [
                [
                    i["name"],
                    i["distribution"],
                    i["description"],
                    ", ".join(f"{k}={v}" for k, v in i["requires"].items()),
                ]
                for i in items
            ],
        )
    if failed:
        print_table(
            "failed plugins (skipped)",
            ["plugin", "distribution", "error"],
            [[f["plugin"], f["distribution"], f["error"]] for f in failed],
        )
    return 0
