"""CLI conventions: --help everywhere, usage errors as one line with exit 2."""

from __future__ import annotations

import pytest
from conftest import run_tcl

from tcl.cli.main import build_parser


def subcommands():
    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return sorted(action.choices)


@pytest.mark.parametrize("command", [[]] + [[c] for c in subcommands()])
def test_help_on_every_command(command):
    proc = run_tcl(*command, "--help")
    assert proc.returncode == 0
    assert "usage: tcl" in proc.stdout


def test_unknown_command_is_one_line():
    proc = run_tcl("frobnicate")
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "invalid choice" in proc.stderr


def test_no_command_prints_help_and_fails():
    proc = run_tcl()
    assert proc.returncode == 2 and "commands" in proc.stdout


def _all_parsers(parser, path=("tcl",)):
    """(command path, parser) of every command and nested subcommand."""
    yield path, parser
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            for name, sub in action.choices.items():
                yield from _all_parsers(sub, path + (name,))


SHARED = {
    "--data": {"train", "eval", "sample", "transfer"},
    "--held-out": {"train", "transfer"},
    "--seed": {"train", "sample", "transfer", "adapt", "collect"},
    "--threads": {"train", "sample", "transfer", "adapt"},
    "--json": {"eval", "transfer", "plugins", "profiles"},
}


@pytest.mark.parametrize("option", sorted(SHARED))
def test_a_shared_option_means_the_same_in_every_command(option):
    seen = {}
    for path, parser in _all_parsers(build_parser()):
        for action in parser._actions:
            if option in action.option_strings:
                seen[path[-1]] = (
                    tuple(action.option_strings),
                    action.type,
                    action.default,
                    action.required,
                    action.help,
                )
    assert SHARED[option] <= set(seen), f"{option} missing from {sorted(SHARED[option] - set(seen))}"
    assert len(set(seen.values())) == 1, f"{option} differs between commands: {seen}"
