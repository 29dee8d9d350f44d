"""The rpc backend's safety defaults: every documented way to start TVM's tracker or server
binds it to an explicit address, never TVM's default of every interface."""

from __future__ import annotations

import re
import subprocess
import sys
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


def test_rpc_spreads_candidates_over_every_server_of_the_key(tmp_path):
    """A real tracker and two servers on 127.0.0.1 under one key: both receive candidates,
    and every candidate comes back measured exactly once, in order."""
    import importlib.util

    import pytest

    if importlib.util.find_spec("tornado") is None:
        pytest.fail("TVM's RPC tracker needs tornado, which is not installed (pip install tornado)")
    from conftest import matmul_module
    from test_backends import _free_port, _port_open, _start, _stop, _wait_for, tiled, write_profile

    from tcl_plugins import backends

    tracker_port, key = _free_port(), "tcl-two-servers"
    procs = [_start(["tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(tracker_port),
                     "--port-end", str(tracker_port + 1), "--silent"])]
    logs = [tmp_path / f"server{i}.log" for i in range(2)]
    profile = write_profile(tmp_path, "t-rpc-two", "rpc", threads=1, measure="run_timeout_s = 30.0",
                            options=f'tracker_host = "127.0.0.1"\ntracker_port = {tracker_port}\n'
                                    f'device_key = "{key}"\nsession_timeout_s = 30')
    backend = backends.RPCBackend(profile)
    try:
        backend.builder()
        _wait_for("the tracker", lambda: _port_open(tracker_port), procs)
        for log in logs:
            port = _free_port()
            with open(log, "wb") as fh:  # not --silent: the log tells which server took a session
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "tvm.exec.rpc_server", "--tracker", f"127.0.0.1:{tracker_port}",
                     "--key", key, "--host", "127.0.0.1", "--port", str(port), "--port-end", str(port + 1)],
                    start_new_session=True, stdout=subprocess.DEVNULL, stderr=fh))
        config = backend.rpc_config()
        _wait_for("both servers to register", lambda: config.count_num_servers() == 2, procs)
        assert backend.runner().pool._threadpool._max_workers == 2  # one session at a time per server
        mod = matmul_module(64, "main")
        candidates = [tiled(mod, seed) for seed in range(1, 9)]
        results = backend.measure(mod, candidates)
        assert len(results) == len(candidates)
        assert [r.error_kind for r in results] == [None] * len(candidates), [r.error_msg for r in results]
        sessions = [log.read_text().count("connected from") for log in logs]
        assert all(n >= 1 for n in sessions), sessions  # both servers timed candidates
        assert sum(sessions) == len(candidates), sessions  # each candidate timed once
    finally:
        backend.close()
        for proc in reversed(procs):
            _stop(proc)
