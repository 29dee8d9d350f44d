"""`tcl collect` and `tcl dataset info` end to end: real pools, real measurements on this CPU."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import TOKEN_NET, matmul_module, run_tcl, start_tcl, wait_for_lines

from tcl.records.database import RECORD_FILE, load_records
from tcl.records.pools import make_task
from tcl.records.program_keys import program_key
from tcl.records.record_writer import RecordWriter


@pytest.fixture(scope="module")
def workload_dir(tmp_path_factory):
    """A TVM JSONDatabase directory holding one small matmul workload and no records: what a
    user points --network at to collect data for their own tasks."""
    path = tmp_path_factory.mktemp("workloads")
    with RecordWriter(path, manifest=False) as writer:
        writer.add_workload(make_task(matmul_module(), name="matmul64"))
    return path


def collect_args(workload_dir: Path, out: Path, pool_size: int, *extra: str) -> list[str]:
    return [
        "collect",
        "--profile",
        "x86-avx2",
        "--network",
        str(workload_dir),
        "--pool-size",
        str(pool_size),
        "--out",
        str(out),
        *extra,
    ]


def test_collect_then_resume_then_info(workload_dir, tmp_path):
    out = tmp_path / "records"
    proc = run_tcl(*collect_args(workload_dir, out, 6, "--sampler", "random", "--budget", "0.5"))
    assert proc.returncode == 0, proc.stderr
    assert "measured 3 programs" in proc.stdout
    records = load_records(out)
    ((task, programs),) = list(records)
    assert len(programs) == 3 and all(p.ok for p in programs)
    assert records.labels(task.key).max() == 1.0
    # a larger budget measures only the rest, never a program twice
    proc = run_tcl(*collect_args(workload_dir, out, 6, "--sampler", "random", "--budget", "1.0"))
    assert proc.returncode == 0, proc.stderr
    assert "measured 3 programs" in proc.stdout and "3 were already measured" in proc.stdout
    keys = [program_key(p.trace) for _, progs in load_records(out) for p in progs]
    assert len(keys) == 6 == len(set(keys))
    info = json.loads(run_tcl("dataset", "info", str(out), "--json").stdout)
    assert info["profiles"]["x86-avx2"]["tasks"] == 1
    assert info["profiles"]["x86-avx2"]["measured_ok"] == 6
    assert info["profiles"]["x86-avx2"]["tasks_on_several_cpus"] == []
    # the first run as if it had been timed on another machine: the task's labels would mix two
    # CPUs, so readers keep the records of the CPU that timed it last
    manifest = json.loads((out / "tcl_manifest.json").read_text())
    manifest["runs"][0]["cpu_model"] = "another CPU"
    (out / "tcl_manifest.json").write_text(json.dumps(manifest))
    later = {program_key(p.trace) for p in load_records(out, one_cpu_per_task=False).programs[task.key][3:]}
    assert {program_key(p.trace) for p in load_records(out).programs[task.key]} == later
    proc = run_tcl("dataset", "info", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "1 task(s) timed on more than one CPU model; each counts only the records of the CPU that timed it " in (
        proc.stdout
    ) and proc.stdout.rstrip().endswith(task.name)
    # a collection that resumes the task times the other CPU's programs here again, and nothing more
    proc = run_tcl(*collect_args(workload_dir, out, 6, "--sampler", "random", "--budget", "1.0"))
    assert proc.returncode == 0, proc.stderr
    assert "3 of them were timed again because another CPU model had timed them" in proc.stdout
    assert len(load_records(out, one_cpu_per_task=False).programs[task.key]) == 9
    assert {program_key(p.trace) for p in load_records(out).programs[task.key]} == set(keys)
    info = json.loads(run_tcl("dataset", "info", str(out), "--json").stdout)["profiles"]["x86-avx2"]
    assert info["tasks_on_several_cpus"] == [] and info["measured_ok"] == 6
    assert json.loads((out / "tcl_manifest.json").read_text())["runs"][-1]["other_cpu_retimed"] == 3


@pytest.mark.slow  # ~40 s: a collection killed after 4 records, then the rerun
def test_sigkill_mid_collection_loses_and_duplicates_nothing(workload_dir, tmp_path):
    import tvm.s_tir.meta_schedule as ms

    out = tmp_path / "records"
    proc = start_tcl(*collect_args(workload_dir, out, 12, "--batch-size", "2"))
    record_file = out / RECORD_FILE
    wait_for_lines(proc, record_file, 4)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = record_file.read_bytes().count(b"\n")
    assert 4 <= killed_at < 12
    rerun = run_tcl(*collect_args(workload_dir, out, 12, "--batch-size", "2"))
    assert rerun.returncode == 0, rerun.stderr
    programs = [p for _, progs in load_records(out) for p in progs]
    keys = [program_key(p.trace) for p in programs]
    assert len(keys) == 12 == len(set(keys))
    database = ms.database.JSONDatabase(work_dir=str(out))
    assert len(database.get_all_tuning_records()) == 12


@pytest.mark.slow  # an uninterrupted collection, three killed ones and the finishing rerun: ~3 min
def test_sigkill_at_random_moments_then_a_rerun_ends_with_the_records_of_an_uninterrupted_run(workload_dir, tmp_path):
    import random
    import time

    args = ("--batch-size", "2", "--sampler", "random", "--budget", "1.0")
    reference = tmp_path / "reference"
    start = time.monotonic()
    assert run_tcl(*collect_args(workload_dir, reference, 12, *args)).returncode == 0
    seconds = time.monotonic() - start
    out = tmp_path / "records"
    rng = random.Random(7)
    for _ in range(3):  # while building the pool, measuring, writing: wherever the clock falls
        proc = start_tcl(*collect_args(workload_dir, out, 12, *args))
        try:
            proc.wait(timeout=rng.uniform(0.1, 0.9) * seconds)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    assert run_tcl(*collect_args(workload_dir, out, 12, *args)).returncode == 0
    keys = sorted(program_key(p.trace) for _, progs in load_records(out) for p in progs)
    assert keys == sorted(program_key(p.trace) for _, progs in load_records(reference) for p in progs)
    assert len(keys) == 12 == len(set(keys))


def test_unknown_names_fail_before_work(workload_dir, tmp_path, capsys):
    from tcl.cli.main import main  # in this process: the checks come before any tvm work anyway

    never = tmp_path / "never"
    cases = [
        (collect_args(workload_dir, never, 4, "--sampler", "best"), "unknown sampler 'best'; choices: all, random"),
        (collect_args(workload_dir, never, 4, "--profile", "x86-nope"), "unknown profile 'x86-nope'; choices:"),
        (
            collect_args(workload_dir, never, 4, "--rounds", "2", "--model", "xgb", "--epochs", "2"),
            "cost model 'xgb': bad options",
        ),
        (
            ["collect", "--profile", "x86-avx2", "--network", "resnet-19", "--pool-size", "4", "--out", str(never)],
            "unknown network 'resnet-19'; choices: bert-base, bert-base-b8, bert-tiny",
        ),
        (
            collect_args(workload_dir, never, 4, "--input-shape", "1,3"),
            "--input-shape applies only to a network given as path/file.py:ClassName",
        ),
    ]
    for args, expected in cases:
        assert main(args) == 2
        stderr = capsys.readouterr().err
        assert expected in stderr and len(stderr.strip().splitlines()) == 1, stderr
        assert not never.exists()


@pytest.mark.slow  # ~25 s: a whole collection of a user's model file
def test_a_model_file_is_collected_like_a_registered_network(tmp_path):
    net = tmp_path / "user_net.py"
    built = tmp_path / "built.log"
    net.write_text(
        TOKEN_NET
        + f"""

class CountedNet(TokenNet):
    def __init__(self):
        super().__init__()
        with open({str(built)!r}, "a") as log:
            log.write("built\\n")
"""
    )
    out = tmp_path / "records"
    proc = run_tcl(
        "collect", "--profile", "x86-avx2", "--network", f"{net}:CountedNet", "--pool-size", "2", "--out", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    records = load_records(out)
    assert records.tasks and all(t.networks == ("user_net:CountedNet",) for t in records.tasks.values())
    assert all(len(programs) == 2 and all(p.ok for p in programs) for _, programs in records)
    assert built.read_text().splitlines() == ["built"]  # the user's module is built once


def test_corrupt_record_line_is_named(workload_dir, tmp_path):
    out = tmp_path / "records"
    assert run_tcl(*collect_args(workload_dir, out, 2)).returncode == 0
    lines = (out / RECORD_FILE).read_text().splitlines()
    (out / RECORD_FILE).write_text(lines[0] + "\n" + "[0, {not json\n" + lines[1] + "\n")
    proc = run_tcl("dataset", "info", str(out))
    assert proc.returncode == 2
    assert f"{out / RECORD_FILE}:2" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow  # ~40 s: an interrupted collection and its rerun (Ctrl-C while drawing stays in the default run)
def test_ctrl_c_stops_without_false_error_records(workload_dir, tmp_path):
    out = tmp_path / "records"
    # own session, so the interrupt reaches the workers too, as a terminal's Ctrl-C does
    proc = start_tcl(
        *collect_args(workload_dir, out, 12, "--batch-size", "2"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    wait_for_lines(proc, out / RECORD_FILE, 2)
    os.killpg(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    programs = [p for _, progs in load_records(out) for p in progs]
    assert programs and all(p.ok for p in programs), [p.error for p in programs if not p.ok]
    rerun = run_tcl(*collect_args(workload_dir, out, 12, "--batch-size", "2"))
    assert rerun.returncode == 0, rerun.stderr
    assert len([p for _, progs in load_records(out) for p in progs]) == 12


def test_ctrl_c_while_drawing_the_pool_stops_at_once(workload_dir, tmp_path):
    import time

    out = tmp_path / "records"
    proc = start_tcl(*collect_args(workload_dir, out, 20000), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = ""
    while not seen.startswith("pool "):  # the status line printed as the draw begins
        seen = proc.stderr.readline()
        assert seen, "tcl collect ended before it drew a pool"
    time.sleep(2)  # well inside drawing 20,000 candidates
    assert proc.poll() is None
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted" in stderr and "Traceback" not in stderr, stderr
    assert time.monotonic() - start < 5
    assert not (out / RECORD_FILE).exists()  # it was still drawing: nothing measured


@pytest.mark.slow  # ~40 s: everything runs beside two busy loops
def test_collect_warns_about_programs_timed_while_others_use_the_cpu(workload_dir, tmp_path):
    from conftest import foreign_busy_loop

    with foreign_busy_loop(), foreign_busy_loop():
        proc = run_tcl(*collect_args(workload_dir, tmp_path / "records", 4, "--batch-size", "2"))
    assert proc.returncode == 0, proc.stderr
    assert "measured 4 programs" in proc.stdout
    assert "of them were timed while other processes used up to" in proc.stderr
    assert "warning: other processes are using" in proc.stderr


@pytest.mark.slow  # ~40 s, and it needs the machine to itself: a collection beside two busy loops
def test_idle_only_times_a_loaded_batch_again_and_the_manifest_says_so(workload_dir, tmp_path):
    from conftest import foreign_busy_loop

    from tcl.records.manifest import read_manifest

    out = tmp_path / "records"
    args = collect_args(workload_dir, out, 6, "--batch-size", "2", "--idle-only")
    proc = start_tcl(*args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_lines(proc, out / RECORD_FILE, 2)  # the first batch is in: now someone else takes the CPU
    with foreign_busy_loop(seconds=6), foreign_busy_loop(seconds=6):
        stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    assert "measured 6 programs" in stdout
    assert "programs were timed again because other processes took the CPU" in stderr
    assert "were timed while other processes used" not in stderr  # no loaded timing was kept
    (run,) = read_manifest(out)["runs"]
    assert run["idle_only"] and run["measured"] == 6 and run["busy_measured"] == 0
    assert run["retimed"] >= 2 and run["busy_cores_max"] >= 0.5
    assert run["profile"] == "x86-avx2" and run["measure"]["repeat"] >= 1 and run["commit"]
    assert sum(p.ok for _, progs in load_records(out) for p in progs) == 6


@pytest.mark.slow  # ~60 s: two idle-only collections taking turns
def test_two_idle_only_collections_on_one_machine_take_turns(workload_dir, tmp_path):
    """Each would see the other as load and wait for ever; taking turns, both finish with
    every timing taken while the other one waited."""
    from tcl.records.manifest import read_manifest

    outs = [tmp_path / "first", tmp_path / "second"]
    procs = [
        start_tcl(
            *collect_args(workload_dir, out, 6, "--batch-size", "2", "--idle-only"), stderr=subprocess.PIPE, text=True
        )
        for out in outs
    ]
    for proc in procs:
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr
    for out in outs:
        (run,) = read_manifest(out)["runs"]
        assert run["measured"] == 6 and run["busy_measured"] == 0
        assert sum(p.ok for _, progs in load_records(out) for p in progs) == 6


@pytest.mark.slow  # ~35 s: a pool searched with the shipped Mamba model
def test_pools_mix_random_and_model_guided_evolutionary_candidates(workload_dir, tmp_path):
    from tcl.records.pools import load_pool

    checkpoint = Path(__file__).parents[1] / "plugins" / "pretrained" / "x86-avx2" / "mamba"
    out = tmp_path / "records"
    proc = run_tcl(
        *collect_args(workload_dir, out, 8, "--budget", "1", "--pool-model", str(checkpoint), "--pool-random", "0.5")
    )
    assert proc.returncode == 0, proc.stderr
    (origins,) = load_pool(out / "pool").origins.values()
    assert origins == ["random"] * 4 + ["evolutionary"] * 4
    for extra, expected in [
        (["--pool-random", "1.5"], "argument --pool-random: must be a fraction in [0, 1], got 1.5"),
        (["--pool-model", str(tmp_path)], "not a checkpoint"),
    ]:
        never = tmp_path / "never"
        proc = run_tcl(*collect_args(workload_dir, never, 4), *extra)
        assert proc.returncode == 2 and expected in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and not never.exists()


@pytest.mark.slow  # ~40 s: two collections around a corrupted pool
def test_a_candidate_tvm_cannot_replay_becomes_a_build_error_record(workload_dir, tmp_path):
    from tcl.records.pools import POOL_CANDIDATES, load_pool

    out = tmp_path / "records"
    proc = run_tcl(*collect_args(workload_dir, out, 4, "--sampler", "random", "--budget", "0.5"))
    assert proc.returncode == 0, proc.stderr
    measured = {program_key(p.trace) for _, progs in load_records(out) for p in progs}
    ((key, traces),) = load_pool(out / "pool").traces.items()
    victim = next(i for i, t in enumerate(traces) if program_key(t) not in measured)
    # well-formed, but names a block the workload does not have (same length: the pool's
    # metadata commits the file's bytes)
    path = out / "pool" / POOL_CANDIDATES
    lines = path.read_text().splitlines(keepends=True)
    assert '["C","main"]' in lines[victim]
    lines[victim] = lines[victim].replace('["C","main"]', '["Z","main"]')
    path.write_text("".join(lines))
    proc = run_tcl(*collect_args(workload_dir, out, 4, "--sampler", "random", "--budget", "1.0"))
    assert proc.returncode == 0, proc.stderr
    assert "measured 2 programs" in proc.stdout
    programs = load_records(out).programs[key]
    failed = [p for p in programs if not p.ok]
    assert len(programs) == 4 and len(failed) == 1
    assert failed[0].error.startswith("build: trace replay failed"), failed[0].error
    # a model that ranks the pool (an active-learning sampler's) names the candidate's line
    from tcl.api.discovery import registry
    from tcl.api.errors import TclError

    pool = load_pool(out / "pool")
    featurizer = registry().create("featurizers", "per-store", target={"kind": "llvm", "mcpu": "core-avx2"})
    with pytest.raises(TclError) as refused:
        featurizer.featurize(pool.tasks[key], pool.programs(key))
    assert str(refused.value).startswith(f"{path}:{victim + 1}: per-store: cannot replay"), refused.value
