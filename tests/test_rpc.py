"""The rpc backend's safety defaults: every documented way to start TVM's tracker or server
binds it to an explicit address, never TVM's default of every interface."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
START_COMMAND = re.compile(r"-m tvm\.exec\.rpc_(server|tracker)\b.*")


def _documented_start_commands() -> list[tuple[Path, str]]:
    files = [
        *ROOT.glob("*.md"),
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "hardware_profiles").glob("*.toml"),
        *(ROOT / "data").glob("*.sh"),
        *(ROOT / "tcl").rglob("*.py"),
        *(ROOT / "plugins").glob("*.py"),
    ]
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


@pytest.fixture
def two_servers(tmp_path):
    """A real tracker and two servers on 127.0.0.1 under one key; yields (profile file, server
    logs). Servers log each session ("connected from"), so a test can tell who timed what."""
    if importlib.util.find_spec("tornado") is None:
        pytest.fail("TVM's RPC tracker needs tornado, which is not installed (pip install tornado)")
    from test_backends import _free_port, _port_open, _start, _stop, _wait_for

    tracker_port, key = _free_port(), "tcl-two-servers"
    procs = [
        _start(
            [
                "tvm.exec.rpc_tracker",
                "--host",
                "127.0.0.1",
                "--port",
                str(tracker_port),
                "--port-end",
                str(tracker_port + 1),
                "--silent",
            ]
        )
    ]
    logs = [tmp_path / f"server{i}.log" for i in range(2)]
    profile = tmp_path / "profiles" / "t-rpc-two.toml"
    profile.parent.mkdir()
    profile.write_text(
        'name = "t-rpc-two"\ndescription = "two local rpc servers"\nbackend = "rpc"\nruntime_threads = 1\n'
        '[target]\nkind = "llvm"\nnum-cores = 1\n[measure]\nnumber = 2\nrepeat = 1\nmin_repeat_ms = 5\n'
        f'run_timeout_s = 30.0\n[backend_options]\ntracker_host = "127.0.0.1"\ntracker_port = {tracker_port}\n'
        f'device_key = "{key}"\nsession_timeout_s = 30\n'
    )
    try:
        _wait_for("the tracker", lambda: _port_open(tracker_port), procs)
        for log in logs:
            port = _free_port()
            with open(log, "wb") as fh:  # not --silent: the log tells which server took a session
                procs.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "tvm.exec.rpc_server",
                            "--tracker",
                            f"127.0.0.1:{tracker_port}",
                            "--key",
                            key,
                            "--host",
                            "127.0.0.1",
                            "--port",
                            str(port),
                            "--port-end",
                            str(port + 1),
                        ],
                        start_new_session=True,
                        stdout=subprocess.DEVNULL,
                        stderr=fh,
                    )
                )
        from tcl.api.profiles import load_profile_file
        from tcl_plugins.backends.rpc import RPCBackend

        config = RPCBackend(load_profile_file(profile)).rpc_config()
        _wait_for("both servers to register", lambda: config.count_num_servers() == 2, procs)
        yield profile, logs
    finally:
        for proc in reversed(procs):
            _stop(proc)


def _sessions(logs: list[Path]) -> list[int]:
    return [log.read_text().count("connected from") for log in logs]


def test_rpc_spreads_candidates_over_every_server_of_the_key(two_servers):
    """Both servers receive candidates, and every candidate is timed exactly once."""
    from conftest import matmul_module
    from test_backends import tiled

    from tcl.api.profiles import load_profile_file
    from tcl_plugins.backends.rpc import RPCBackend

    profile, logs = two_servers
    backend = RPCBackend(load_profile_file(profile))
    try:
        assert backend.runner().pool._threadpool._max_workers == 2  # one session at a time per server
        mod = matmul_module(64, "main")
        candidates = [tiled(mod, seed) for seed in range(1, 9)]
        results = backend.measure(mod, candidates)
        assert len(results) == len(candidates)
        assert [r.error_kind for r in results] == [None] * len(candidates), [r.error_msg for r in results]
        sessions = _sessions(logs)
        assert all(n >= 1 for n in sessions), sessions  # both servers timed candidates
        assert sum(sessions) == len(candidates), sessions  # each candidate timed once
    finally:
        backend.close()


@pytest.mark.slow  # minutes: pools are generated and every candidate built, then timed over RPC
def test_rpc_collection_over_two_servers_loses_and_duplicates_nothing(two_servers, tmp_path):
    from conftest import run_tcl

    from tcl.records.database import load_records
    from tcl.records.program_keys import program_key

    profile, logs = two_servers
    out = tmp_path / "records"
    proc = run_tcl(
        "--profiles-dir",
        str(profile.parent),
        "collect",
        "--profile",
        "t-rpc-two",
        "--network",
        str(ROOT / "data" / "bundled" / "x86-generic"),
        "--max-tasks",
        "2",
        "--pool-size",
        "12",
        "--batch-size",
        "6",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    records = load_records(out)
    assert len(records.tasks) == 2
    for _task, programs in records:
        keys = [program_key(p.trace) for p in programs]
        assert len(keys) == 12 and len(set(keys)) == 12  # the whole pool, each program once
    timed = sum(1 for _, programs in records for p in programs if not (p.error or "").startswith("build"))
    sessions = _sessions(logs)
    assert all(n >= 1 for n in sessions) and sum(sessions) == timed, sessions  # each built program timed once
