"""The import contracts of pyproject.toml hold (layers, no plugin imports in the core, no
cycles), and lint-imports really fails when a layer imports one above it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


def test_the_import_contracts_hold():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_an_import_from_a_higher_layer_breaks_the_contract(tmp_path):
    package = tmp_path / "layered"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "high.py").write_text("VALUE = 1\n")
    (package / "low.py").write_text("from layered.high import VALUE\n")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.importlinter]\nroot_package = "layered"\n\n'
        '[[tool.importlinter.contracts]]\nname = "low below high"\ntype = "layers"\n'
        'layers = ["layered.high", "layered.low"]\n'
    )
    result = lint_imports(tmp_path, pythonpath=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "layered.low -> layered.high" in result.stdout


# Plugin names that are also words of TVM or of our formats (MetaSchedule's own cost models,
# a device kind, a pool candidate's origin), so they may appear in the core in that sense.
ALSO_WORDS = {"random", "xgb", "cuda", "local", "rpc", "all"}


def test_the_core_names_built_in_plugins_only_in_its_defaults():
    import ast

    from tcl.api import defaults, discovery

    names = {name for entries in discovery.registry().entries.values() for name in entries} - ALSO_WORDS
    named = sorted(
        f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}"
        for path in (ROOT / "tcl").rglob("*.py")
        if path != Path(defaults.__file__)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and node.value in names
    )
    assert {"mamba", "rdu", "continual-kd", "bert-tiny"} <= names  # the registry was really read
    assert not named, named
