"""The rpc backend's safety defaults: every documented way to start TVM's tracker or server
binds it to an explicit address, never TVM's default of every interface."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parent.parent
START_COMMAND = re.compile(r"-m tvm\.exec\.rpc_(server|tracker)\b.*")


def _documented_start_commands() -> list[tuple[Path, str]]:
    files = [*ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md"), *(ROOT / "hardware_profiles").glob("*.toml"),
             *(ROOT / "data").glob("*.sh"), *(ROOT / "tcl").rglob("*.py"), *(ROOT / "plugins").glob("*.py")]
    return [(path, m.group(0)) for path in files for m in START_COMMAND.finditer(path.read_text(encoding="utf-8"))]


def test_documented_rpc_commands_bind_to_loopback():
    commands = _documented_start_commands()
    assert any("rpc_server" in c for _, c in commands) and any("rpc_tracker" in c for _, c in commands)
    for path, command in commands:
        if "HOST" in command:  # a placeholder in an error message, next to the tracker's address
            assert "--host HOST" in command, (path, command)
            continue
        assert "--host 127.0.0.1" in command, f"{path}: {command}"


def test_rpc_docs_say_why():
    text = (ROOT / "docs" / "rpc.md").read_text(encoding="utf-8")
    assert "0.0.0.0" in text and "no authentication" in text
