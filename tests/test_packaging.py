"""A normal (non-editable) install must carry the built-in profiles and plugins."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_ships_profiles_and_builtin_plugins(tmp_path):
    source = tmp_path / "src"  # a copy, so the build leaves nothing in the working tree
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "build", "*.egg-info", "__pycache__", "data", "checkpoints", ".pytest_cache"
        ),
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "-w",
            str(tmp_path / "dist"),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "dist").glob("tcl-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        files = set(archive.namelist())
        entry_points = next(archive.read(n).decode() for n in files if n.endswith("entry_points.txt"))
    shipped = {Path(f).name for f in files if f.startswith("tcl/hardware_profiles/")}
    expected = {p.name for p in (ROOT / "hardware_profiles").glob("*.toml")}
    assert expected and expected <= shipped
    modules = {f"tcl/{p.relative_to(ROOT / 'tcl')}" for p in (ROOT / "tcl").rglob("*.py")}
    modules |= {f"tcl_plugins/{p.relative_to(ROOT / 'plugins')}" for p in (ROOT / "plugins").rglob("*.py")}
    assert not modules - files  # every subpackage of tcl and tcl_plugins is listed in pyproject.toml
    weights = {Path(f).relative_to("tcl_plugins") for f in files if f.endswith("/weights.pt")}
    assert weights == {p.relative_to(ROOT / "plugins") for p in (ROOT / "plugins").glob("pretrained/*/*/weights.pt")}
    pool = {f for f in files if f.startswith("tcl_plugins/networks/pool/")}
    assert pool == {f"tcl_plugins/networks/pool/{p.name}" for p in (ROOT / "plugins" / "networks" / "pool").iterdir()}
    assert "[tcl.plugins]" in entry_points and "tcl_plugins.samplers.register" in entry_points
