"""Shared fixtures: real plugin packages installed with pip into temporary directories, and a
runner for the real ``tcl`` command."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

PLUGIN_PACKAGES = Path(__file__).parent / "plugin_packages"
ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "data" / "bundled"  # the bundled records (data/README.md)
IDLE = ROOT / "data" / "idle"  # the same programs measured again on an idle machine
BUNDLED_POOL = ROOT / "plugins" / "networks" / "pool"  # the candidates both were measured from


@pytest.fixture(scope="session", autouse=True)
def own_feature_cache(tmp_path_factory):
    """The suite's commands (in-process and subprocesses alike) keep their feature cache apart
    from the user's."""
    os.environ["TCL_CACHE_DIR"] = str(tmp_path_factory.mktemp("tcl-cache"))


@pytest.fixture(scope="session")
def install_plugin(tmp_path_factory):
    """Install a test plugin package with pip (into its own target dir); return that dir."""
    installed: dict[str, Path] = {}

    def install(package: str) -> Path:
        if package not in installed:
            target = tmp_path_factory.mktemp(package)
            source = shutil.copytree(PLUGIN_PACKAGES / package, target / "src")  # keep build files out of the tree
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--no-deps",
                    "--no-build-isolation",
                    "--disable-pip-version-check",
                    "--target",
                    str(target / "site"),
                    str(source),
                ],
                check=True,
                capture_output=True,
            )
            target = target / "site"
            installed[package] = target
        return installed[package]

    return install


@pytest.fixture(scope="session")
def small_records(tmp_path_factory) -> Path:
    """data/bundled cut to 50 programs of each task per profile by ``tcl sample`` (a quarter of
    it, every task kept): real records for tests that train on them but need not train on all."""
    root = tmp_path_factory.mktemp("small-records")
    procs = [
        start_tcl(
            "sample",
            "--sampler",
            "random",
            "--budget",
            "50",
            "--data",
            str(BUNDLED),
            "--profile",
            profile,
            "--out",
            str(root / profile),
            stderr=subprocess.PIPE,
        )
        for profile in ("x86-avx2", "x86-avx512", "x86-generic")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    return root


def matmul_module(n: int = 64, symbol: str | None = None):
    """A square n x n x n matmul workload; ``symbol`` sets the PrimFunc's global_symbol."""
    import tvm
    from tvm import te

    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    func = te.create_prim_func([a, b, c])
    return tvm.IRModule({"main": func if symbol is None else func.with_attr("global_symbol", symbol)})


def tcl_env(*extra_paths: Path, **variables: str) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(p) for p in extra_paths] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.pop("TCL_DISABLE_EXTERNAL_PLUGINS", None)
    env.update(variables)
    return env


def run_tcl(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 600):
    """Run the real CLI in a subprocess; returns the CompletedProcess."""
    return subprocess.run(
        [sys.executable, "-m", "tcl.cli.main", *args],
        capture_output=True,
        text=True,
        env=env or tcl_env(),
        cwd=cwd,
        timeout=timeout,
    )


def start_tcl(*args: str, **popen_kwargs) -> subprocess.Popen:
    """Start the real CLI in a subprocess, output discarded unless ``popen_kwargs`` say otherwise.

    SIGINT starts at its default in the child, as from a terminal: a shell running the suite as
    a background job starts it ignored, and Python then never raises KeyboardInterrupt, so
    the tests that interrupt a command would not interrupt it."""
    popen_kwargs.setdefault("stdout", subprocess.DEVNULL)
    popen_kwargs.setdefault("stderr", subprocess.DEVNULL)
    popen_kwargs.setdefault("preexec_fn", functools.partial(signal.signal, signal.SIGINT, signal.SIG_DFL))
    return subprocess.Popen([sys.executable, "-m", "tcl.cli.main", *args], env=tcl_env(), **popen_kwargs)


def wait_for_lines(proc: subprocess.Popen, path: Path, lines: int, timeout: float = 300) -> None:
    """Block until ``path`` holds ``lines`` complete lines, so a test can interrupt ``proc``
    mid-way; fails the test if ``proc`` ends first (nothing would be left to interrupt)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and path.read_bytes().count(b"\n") >= lines:
            break
        time.sleep(0.1)
    assert proc.poll() is None, f"the command finished before {path.name} had {lines} lines to interrupt it at"


def run_tcl_json(*args: str, env: dict[str, str] | None = None):
    proc = run_tcl(*args, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@contextlib.contextmanager
def foreign_busy_loop(seconds: int = 60):
    """A busy loop that is not a descendant of this process (its parent shell exits at once,
    so it is re-parented): to the code under test it is someone else's work on the machine."""
    out = subprocess.run(
        ["sh", "-c", f"timeout {seconds} sh -c 'while :; do :; done' >/dev/null 2>&1 & echo $!"],
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(out.stdout.strip())
    try:
        yield pid
    finally:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


#: A model file for `--network FILE:TokenNet`: token ids and a second input, which its
#: example_inputs() gives; NoInputs's example_inputs() returns no tensor.
TOKEN_NET = """
import torch


class TokenNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(100, 32)
        self.fc = torch.nn.Linear(32, 16)

    def forward(self, ids, scale):
        return torch.relu(self.fc(self.embed(ids) * scale))

    def example_inputs(self):
        return torch.randint(0, 100, (2, 8)), torch.rand(2, 8, 1)


class NoInputs(TokenNet):
    def example_inputs(self):
        return "ids"
"""
