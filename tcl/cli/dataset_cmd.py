"""``tcl dataset``: inspect record directories and import TenSet records."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tcl.cli.common import add_json_option, print_json, print_table


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "dataset",
        help="inspect or import measured records",
        description="Inspect record directories (any tree of TVM JSONDatabases) "
        "or import TenSet auto_scheduler records.",
    )
    commands = parser.add_subparsers(title="dataset commands", metavar="COMMAND", parser_class=type(parser))
    info = commands.add_parser(
        "info",
        help="tasks, programs, profiles, failures and size",
        description="Summarize every TVM JSONDatabase found under DIR, grouped by profile.",
    )
    info.add_argument("dir", type=Path, help="record directory (searched recursively)")
    info.add_argument(
        "--split", type=Path, default=None, metavar="FILE", help="also count per part of a split file (data/split.toml)"
    )
    add_json_option(info)
    info.set_defaults(handler=run_info)
    imp = commands.add_parser(
        "import-tenset",
        help="convert TenSet record files (no TVM needed)",
        description="Convert TenSet auto_scheduler record files (one JSON line each) into a "
        "record directory usable by the sequence featurizer.",
    )
    imp.add_argument("path", type=Path, help="a TenSet .json record file or a directory of them")
    imp.add_argument("--out", type=Path, required=True, help="new record directory")
    imp.add_argument("--profile", default=None, help="platform name to record in the manifest")
    imp.add_argument("--target", default=None, help="keep only records of this exact target string")
    imp.set_defaults(handler=run_import)
    for name, packed, what in (("pack", True, "gzip-compress"), ("unpack", False, "expand")):
        cmd = commands.add_parser(
            name,
            help=f"copy a record or pool directory, {what}ing its record files",
            description=f"Copy DIR to a new directory and {what} its JSON-lines record, "
            "workload and candidate files. tcl reads packed directories "
            "as they are; TVM and `tcl collect` need unpacked ones.",
        )
        cmd.add_argument("dir", type=Path, help="record or pool directory (copied recursively)")
        cmd.add_argument("--out", type=Path, required=True, help="new directory")
        cmd.set_defaults(handler=run_pack, packed=packed)
    parser.set_defaults(handler=lambda _args: (parser.print_help(), 2)[1])


def run_info(args: argparse.Namespace) -> int:
    from tcl.records.dataset_info import summarize
    from tcl.records.splits import load_split

    summary = summarize(args.dir, load_split(args.split) if args.split is not None else None)
    if args.json:
        print_json(summary)
        return 0
    rows = []
    for profile, s in summary["profiles"].items():
        ppt = s["programs_per_task"]
        failures = ", ".join(f"{k} {v}" for k, v in s["failures"].items()) or "none"
        rows.append(
            [
                profile,
                s["tasks"],
                s["programs"],
                s["measured_ok"],
                f"{ppt['min']}/{ppt['median']:g}/{ppt['max']}",
                failures,
                ", ".join(s["networks"]) or "-",
            ]
        )
    print_table(
        f"{summary['path']}: {summary['databases']} databases, {summary['bytes'] / 1e6:.1f} MB, "
        f"{summary['distinct_programs']} distinct programs",
        ["profile", "tasks", "programs", "ok", "per task min/median/max", "failures", "networks"],
        rows,
    )
    parts = [
        [profile, part, c["tasks"], c["programs"], c["measured_ok"], f"{c['programs_per_task']['min']}"]
        for profile, s in summary["profiles"].items()
        for part, c in s.get("split", {}).items()
    ]
    if parts:
        print_table(f"by part of {args.split}", ["profile", "part", "tasks", "programs", "ok", "per task min"], parts)
    for profile, s in summary["profiles"].items():
        runs = s.get("runs")
        if runs:
            print(
                f"{profile}: {runs['count']} collection runs, {runs['seconds'] / 3600:.1f} h; "
                f"{runs['busy_measured']} programs timed under load, {runs['retimed']} timed again"
                + ("" if runs["idle_only"] else " (not every run was --idle-only)")
            )
        several = s.get("tasks_on_several_cpus")
        if several:
            print(
                f"{profile}: warning: {len(several)} task(s) timed on more than one CPU model; each counts only the "
                f"records of the CPU that timed it last, until a collection times the rest again: {', '.join(several)}"
            )
    return 0


def run_import(args: argparse.Namespace) -> int:
    from tcl.records.tenset import import_tenset

    s = import_tenset(args.path, args.out, profile=args.profile, target=args.target)
    print(
        f"imported {s.records} records ({s.failed} failed) of {s.tasks} tasks from {s.files} file(s), "
        f"target {s.target!r}, into {s.out_dir}"
    )
    return 0


def run_pack(args: argparse.Namespace) -> int:
    from tcl.records.database import pack_dir

    written = pack_dir(args.dir, args.out, packed=args.packed)
    size = sum(p.stat().st_size for p in written)
    print(f"wrote {len(written)} files ({size / 1e6:.1f} MB) to {args.out}")
    return 0
