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
