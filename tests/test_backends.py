"""The built-in hardware backends measure real programs: no mocks.

Workloads are small matmuls (conftest.matmul_module); candidates are ``tvm.s_tir.Schedule``s with
sampled tile sizes (no TuneContext: creating one imports ``tvm.s_tir.tensor_intrin``, which
takes a minute on a busy 2-core VM). The rpc test runs a real tracker and server on
127.0.0.1 and tears them down with their process groups.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import attrs
import pluggy
import pytest
from conftest import matmul_module

tvm = pytest.importorskip("tvm")

from tcl.api import hookspecs  # noqa: E402
from tcl.api.errors import TclError  # noqa: E402
from tcl.api.measure import classify_error, measure_with  # noqa: E402
from tcl.api.profiles import load_profile_file  # noqa: E402
from tcl_plugins.backends import register  # noqa: E402
from tcl_plugins.backends.cuda import CUDABackend  # noqa: E402
from tcl_plugins.backends.local import LocalBackend  # noqa: E402
from tcl_plugins.backends.rpc import RPCBackend  # noqa: E402

HAS_CUDA = bool(tvm.cuda(0).exist)
NO_CUDA_REASON = "no CUDA device visible to TVM (tvm.cuda(0).exist is False)"


# ---- workloads and candidates ------------------------------------------------------------


def tiled(mod: "tvm.IRModule", seed: int) -> "tvm.s_tir.Schedule":
    """A random point of a small design space: sampled tiles, parallel outer, vector inner."""
    sch = tvm.s_tir.Schedule(mod, seed=seed)
    i, j, k = sch.get_loops(sch.get_sblock("C"))
    i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2))
    j0, j1 = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=16))
    sch.reorder(i0, j0, k, i1, j1)
    sch.parallel(i0)
    sch.vectorize(j1)
    return sch


def gpu_bound(mod: "tvm.IRModule") -> "tvm.s_tir.Schedule":
    """Valid TIR that LLVM cannot compile: a loop bound to threadIdx.x."""
    sch = tvm.s_tir.Schedule(mod)
    i, _, _ = sch.get_loops(sch.get_sblock("C"))
    sch.bind(i, "threadIdx.x")
    return sch


def write_profile(
    tmp: Path,
    name: str,
    backend: str,
    *,
    threads: int = 2,
    target: str | None = None,
    measure: str = "",
    options: str = "",
) -> object:
    target = target or 'kind = "llvm"\nnum-cores = 2'
    text = (
        f'name = "{name}"\ndescription = "test profile {name}"\nbackend = "{backend}"\n'
        f"runtime_threads = {threads}\n[target]\n{target}\n"
        f"[measure]\nnumber = 2\nrepeat = 1\nmin_repeat_ms = 5\n{measure}\n"
        f"[backend_options]\n{options}\n"
    )
    path = tmp / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return load_profile_file(path)


@pytest.fixture(scope="module")
def profile_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("profiles")


@pytest.fixture(scope="module")
def local(profile_dir: Path):
    backend = LocalBackend(write_profile(profile_dir, "t-local", "local", threads=2))
    yield backend
    backend.close()


# ---- registration and options -------------------------------------------------------------


def test_hook_registers_three_backends() -> None:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(register)
    records = [r for batch in pm.hook.tcl_register_hardware_backends() for r in batch]
    assert {r.name: r.device for r in records} == {"local": "cpu", "rpc": "rpc", "cuda": "cuda"}
    assert {r.name: r.factory for r in records}["local"].resolve() is LocalBackend


def test_bad_options_are_one_line_errors(profile_dir: Path) -> None:
    with pytest.raises(TclError, match=r"backend_options\.nonsense': unknown for backend local"):
        LocalBackend(write_profile(profile_dir, "t-bad", "local", options="nonsense = 1"))
    with pytest.raises(TclError, match=r"backend_options\.device_key': expected a string, got nothing"):
        RPCBackend(
            write_profile(profile_dir, "t-rpc-bad", "rpc", options='tracker_host = "127.0.0.1"\ntracker_port = 9')
        )
    with pytest.raises(TclError, match=r"backend_options\.retime_spread': expected a number in \[0, 100\), got 100"):
        LocalBackend(write_profile(profile_dir, "t-spread", "local", options="retime_spread = 100"))
    with pytest.raises(TclError, match=r"backend_options\.single_run_ms': expected a number >= 0, got -1"):
        LocalBackend(write_profile(profile_dir, "t-single", "local", options="single_run_ms = -1"))
    with pytest.raises(TclError, match="needs a target of kind llvm or c, got 'cuda'"):
        LocalBackend(write_profile(profile_dir, "t-kind", "local", target='kind = "cuda"'))


def test_extensions_a_cpu_lacks_are_the_ones_its_flags_do_not_list() -> None:
    from tcl.measurement.host_cpu import missing_extensions

    avx2_only = {"avx", "avx2", "fma", "f16c", "sse4_2"}  # /proc/cpuinfo's names
    x86 = lambda mcpu, **attrs: tvm.target.Target({"kind": "llvm", "mcpu": mcpu, **attrs})  # noqa: E731
    assert {"avx512f", "avx512bw", "avx512vl"} <= set(missing_extensions(x86("skylake-avx512"), avx2_only))
    assert missing_extensions(x86("haswell"), avx2_only) == []
    assert missing_extensions(x86("haswell", mattr=["+avx512f"]), avx2_only) == ["avx512f"]
    assert missing_extensions(x86("cascadelake"), avx2_only | {"avx512f", "avx512bw", "avx512cd", "avx512dq"}) == [
        "avx512vl",
        "avx512vnni",
    ]
    arm = tvm.target.Target({"kind": "llvm", "mtriple": "aarch64-linux-gnu"})
    assert missing_extensions(arm, avx2_only) == []  # not x86 code: not this check's business


def test_local_refuses_a_profile_whose_code_this_cpu_cannot_run(tmp_path: Path, capsys) -> None:
    from tcl.api.profiles import get_profile
    from tcl.cli.main import main
    from tcl.measurement.host_cpu import host_cpu_flags, missing_extensions

    if host_cpu_flags() is None or os.uname().machine != "x86_64":
        pytest.skip("this host does not list its CPU flags in /proc/cpuinfo")
    newer = ("sapphirerapids", "skylake-avx512", "znver4", "haswell")
    x86 = lambda mcpu: tvm.target.Target({"kind": "llvm", "mcpu": mcpu})  # noqa: E731
    mcpu = next((m for m in newer if missing_extensions(x86(m))), None)
    if mcpu is None:
        pytest.skip(f"this CPU has every vector extension of {', '.join(newer)}")
    write_profile(tmp_path, "too-new", "local", target=f'kind = "llvm"\nmcpu = "{mcpu}"\nnum-cores = 2')
    with pytest.raises(
        TclError, match=rf"profile 'too-new': backend local: this CPU \(.+\) lacks .+, which code for {mcpu}"
    ):
        LocalBackend(load_profile_file(tmp_path / "too-new.toml"))
    # both commands that measure refuse it before any work
    for command in (
        ["collect", "--network", "bert-tiny", "--pool-size", "4"],
        ["tune", "--network", "bert-tiny", "--cost-model", "xgb", "--trials", "4"],
    ):
        out = tmp_path / "never"
        assert main([*command, "--profiles-dir", str(tmp_path), "--profile", "too-new", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert "illegal instruction" in err and len(err.strip().splitlines()) == 1, err
        assert not out.exists()
    assert missing_extensions(get_profile("native").tvm_target()) == []  # the profile that follows this CPU runs


def test_timeout_messages_are_classified() -> None:
    assert classify_error("run", "LocalRunner: Timeout, killed after 1.0 seconds\n") == "timeout"
    assert classify_error("build", "LocalBuilder: Timeout, killed after 30 seconds") == "timeout"
    assert classify_error("run", "tvm.error.RPCSessionTimeoutError: Your 3.0s session has expired") == "timeout"
    assert classify_error("run", "LocalRunner: An exception occurred\nshape mismatch") == "run"


# ---- local --------------------------------------------------------------------------------


def test_local_measures_candidates(local) -> None:
    mod = matmul_module(64, "main")
    cands = [tiled(mod, seed) for seed in (1, 2, 3, 4)]
    results = local.measure(mod, cands)
    assert len(results) == 4
    for res in results:
        assert res.ok, res.error_msg
        assert res.run_secs and all(0 < t < 1 for t in res.run_secs)
    # the same builder and runner (and their worker processes) serve the next batch
    builder, runner = local.builder(), local.runner()
    again = local.measure(mod, cands[:2])
    assert all(r.ok for r in again)
    assert local.builder() is builder and local.runner() is runner


def test_local_worker_threads_follow_profile(local) -> None:
    pool = local.runner().pool
    assert pool.submit(tvm.runtime.num_threads).result() == 2
    assert pool.submit(os.getenv, "OPENBLAS_NUM_THREADS").result() == "1"


def test_failures_become_error_results(local) -> None:
    mod = matmul_module(64, "main")
    wrong_shape = tiled(matmul_module(32, "main"), 1)  # builds, but the runner feeds it 64x64 tensors
    results = local.measure(mod, [gpu_bound(mod), tiled(mod, 5), "not a schedule", wrong_shape])
    kinds = [r.error_kind for r in results]
    assert kinds == ["build", None, "build", "run"], [r.error_msg for r in results]
    assert "threadIdx" in results[0].error_msg or "not implemented" in results[0].error_msg
    assert results[1].ok


def test_measure_with_accepts_prim_funcs(local) -> None:
    mod = matmul_module(64, "main")
    (res,) = measure_with(local.builder(), local.runner(), local.profile.target, mod, [mod["main"]])
    assert res.ok and res.run_secs[0] > 0


def test_run_timeout_becomes_timeout(profile_dir: Path) -> None:
    profile = write_profile(profile_dir, "t-timeout", "local", threads=1, measure="run_timeout_s = 1.0")
    with LocalBackend(profile) as backend:
        big = matmul_module(2048, "main")  # untiled: ~1 min single-threaded
        (res,) = backend.measure(big, [tvm.s_tir.Schedule(big)])
        assert res.error_kind == "timeout", res.error_msg
        assert "Timeout" in res.error_msg
        # the killed worker is replaced; later candidates are measured normally
        small = matmul_module(64, "main")
        (after,) = backend.measure(small, [tiled(small, 1)])
        assert after.ok, after.error_msg


# ---- the local engine (build in groups on every core, then time alone) ---------------------


def test_engine_isolates_a_bad_candidate_in_its_group() -> None:
    from tcl.measurement.local_engine import EngineSettings, LocalEngine

    engine = LocalEngine(
        EngineSettings(build_workers=2, group_size=3, number=2, repeat=2, min_repeat_ms=5, runtime_threads=1)
    )
    try:
        mod = matmul_module(64, "main")
        cands = [tiled(mod, 1), gpu_bound(mod), *(tiled(mod, seed) for seed in (2, 3, 4, 5))]
        results = engine.measure("llvm", mod, cands)
        assert [r.error_kind for r in results] == [None, "build", None, None, None, None], [
            r.error_msg for r in results
        ]
        assert all(len(r.run_secs) == 2 for r in results if r.ok)
        # the timing worker runs the requested thread count, whatever the host has
        assert engine._time_pool().submit(tvm.runtime.num_threads).result() == 1
    finally:
        engine.close()


def vectorized(mod: "tvm.IRModule", inner: int) -> "tvm.s_tir.Schedule":
    """A fixed good schedule: rows in parallel, ``inner`` columns per vector, k in between."""
    sch = tvm.s_tir.Schedule(mod)
    i, j, k = sch.get_loops(sch.get_sblock("C"))
    j0, j1 = sch.split(j, [None, inner])
    sch.reorder(i, j0, k, j1)
    sch.parallel(i)
    sch.vectorize(j1)
    return sch


def test_engine_times_each_candidate_of_a_group_as_itself(local) -> None:
    """A naive loop nest between vectorized ones in one library: the engine must find it the
    slowest by far, as MetaSchedule's own builder and runner do (a mixed-up function would not)."""
    mod = matmul_module(256, "main")
    cands = [vectorized(mod, 8), tvm.s_tir.Schedule(mod), vectorized(mod, 16), vectorized(mod, 32)]
    engine = [min(r.run_secs) for r in local.measure(mod, cands)]
    reference = [
        min(r.run_secs) for r in measure_with(local.builder(), local.runner(), local.profile.target, mod, cands)
    ]
    for times in (engine, reference):
        assert times[1] > 3 * max(times[0], times[2], times[3]), (engine, reference)


@pytest.mark.slow  # ~30 s: times deliberately slow candidates
def test_engine_times_a_slow_candidate_once_when_asked() -> None:
    """``single_run_ms``: after a candidate that ran that long, the next one's first run
    comes first and, when that long too, is its only timed run; after a fast candidate the
    next is timed ``repeat`` times as usual. What the last candidate was is kept per workload,
    across batches."""
    from tcl.measurement.local_engine import EngineSettings, LocalEngine

    mod = matmul_module(256, "main")
    naive = tvm.s_tir.Schedule(mod)
    cands = [naive, naive, vectorized(mod, 8), vectorized(mod, 16)]
    settings = EngineSettings(build_workers=2, repeat=3, min_repeat_ms=5, runtime_threads=1)
    engine = LocalEngine(settings)
    try:
        full = [min(r.run_secs) for r in engine.measure("llvm", mod, cands)]
    finally:
        engine.close()
    between_ms = 1e3 * (full[0] * max(full[2:])) ** 0.5  # the naive loop is far slower
    other = matmul_module(128, "main")
    engine = LocalEngine(attrs.evolve(settings, single_run_ms=between_ms))
    try:
        runs = [len(r.run_secs) for r in engine.measure("llvm", mod, cands)]
        runs.append([len(r.run_secs) for r in engine.measure("llvm", mod, [naive])])
        runs.append([len(r.run_secs) for r in engine.measure("llvm", other, [vectorized(other, 8)])])
        runs.append([len(r.run_secs) for r in engine.measure("llvm", mod, [naive])])
    finally:
        engine.close()
    assert runs == [3, 1, 3, 3, [3], [3], [1]], (runs, full)


# ---- rpc ----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str]) -> subprocess.Popen:
    # own process group: rpc_server serves from a PopenWorker child that a plain terminate()
    # would orphan
    return subprocess.Popen(
        [sys.executable, "-m", *args], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def _stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


def _wait_for(what: str, ready, procs: list[subprocess.Popen], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                pytest.fail(f"{proc.args} exited with {proc.returncode} before {what}")
        try:
            if ready():
                return
        except OSError:
            pass
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def _port_open(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        return True


@pytest.mark.slow  # ~20 s: a tracker and one server (tests/test_rpc.py's two servers stay in the default run)
def test_rpc_measures_through_tracker(profile_dir: Path) -> None:
    if importlib.util.find_spec("tornado") is None:
        pytest.fail("TVM's RPC tracker needs tornado, which is not installed (pip install tornado)")
    tracker_port, server_port, key = _free_port(), _free_port(), "tcl-test-device"
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
    profile = write_profile(
        profile_dir,
        "t-rpc",
        "rpc",
        threads=1,
        measure="run_timeout_s = 30.0",
        options=f'tracker_host = "127.0.0.1"\ntracker_port = {tracker_port}\ndevice_key = "{key}"\n'
        "session_timeout_s = 30",
    )
    backend = RPCBackend(profile)
    try:
        backend.builder()  # its worker starts while the tracker and server come up
        _wait_for("the tracker", lambda: _port_open(tracker_port), procs)
        procs.append(
            _start(
                [
                    "tvm.exec.rpc_server",
                    "--tracker",
                    f"127.0.0.1:{tracker_port}",
                    "--key",
                    key,
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(server_port),
                    "--port-end",
                    str(server_port + 1),
                    "--silent",
                ]
            )
        )
        config = backend.rpc_config()
        runner = backend.runner()
        _wait_for("the server to register", lambda: config.count_num_servers() > 0, procs)
        mod = matmul_module(64, "main")
        results = backend.measure(mod, [tiled(mod, seed) for seed in (1, 2, 3)])
        assert [r.error_kind for r in results] == [None] * 3, [r.error_msg for r in results]
        assert all(0 < t < 1 for r in results for t in r.run_secs)
        assert backend.runner() is runner
    finally:
        backend.close()
        for proc in reversed(procs):
            _stop(proc)


def test_rpc_without_tracker_is_a_clear_error(profile_dir: Path) -> None:
    profile = write_profile(
        profile_dir,
        "t-rpc-none",
        "rpc",
        threads=1,
        measure="run_timeout_s = 1.0",
        options=f'tracker_host = "127.0.0.1"\ntracker_port = {_free_port()}\n'
        'device_key = "nobody"\nsession_timeout_s = 1',
    )
    backend = RPCBackend(profile)
    try:
        with pytest.raises(TclError, match="cannot reach the RPC tracker"):
            backend.runner()
    finally:
        backend.close()


# ---- cuda ---------------------------------------------------------------------------------


@pytest.mark.skipif(HAS_CUDA, reason="a CUDA device is present")
def test_cuda_backend_refuses_without_gpu(profile_dir: Path) -> None:
    profile = write_profile(
        profile_dir,
        "t-cuda-none",
        "cuda",
        threads=1,
        target='kind = "cuda"\narch = "sm_90"\n[target.host]\nkind = "llvm"',
    )
    with pytest.raises(TclError, match=r"no CUDA device 0 visible to TVM") as info:
        CUDABackend(profile)
    assert "\n" not in str(info.value)


@pytest.mark.skipif(not HAS_CUDA, reason=NO_CUDA_REASON)
def test_cuda_measures_candidates(profile_dir: Path) -> None:
    arch = "sm_" + tvm.cuda(0).compute_version.replace(".", "")
    profile = write_profile(
        profile_dir, "t-cuda", "cuda", threads=1, target=f'kind = "cuda"\narch = "{arch}"\n[target.host]\nkind = "llvm"'
    )
    mod = matmul_module(64, "main")

    def gpu_candidate(tile: int) -> "tvm.s_tir.Schedule":
        sch = tvm.s_tir.Schedule(mod)
        i, j, _ = sch.get_loops(sch.get_sblock("C"))
        i0, i1 = sch.split(i, [None, tile])
        sch.bind(i0, "blockIdx.x")
        sch.bind(i1, "threadIdx.x")
        return sch

    with CUDABackend(profile) as backend:
        results = backend.measure(mod, [gpu_candidate(t) for t in (8, 16, 32)] + [tvm.s_tir.Schedule(mod)])
    assert [r.error_kind for r in results[:3]] == [None] * 3, [r.error_msg for r in results]
    assert all(t > 0 for r in results[:3] for t in r.run_secs)
    assert results[3].error_kind == "build"  # unbound loops do not compile for a GPU
