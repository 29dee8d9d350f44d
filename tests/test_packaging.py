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
    assert "tcl_plugins/samplers.py" in files
    assert "[tcl.plugins]" in entry_points and "tcl_plugins.samplers" in entry_points
