"""`tcl sample`: offline subsets of the bundled records, readable by TVM and by `tcl train`."""

from __future__ import annotations

import pytest
from conftest import BUNDLED, run_tcl

from tcl.records.database import load_records
from tcl.records.program_keys import program_key


def test_rdu_subset_is_ten_percent_per_task_and_loads_in_tvm(tmp_path, small_records):
    import tvm.s_tir.meta_schedule as ms

    out = tmp_path / "subset"
    proc = run_tcl(
        "sample",
        "--sampler",
        "rdu-d",
        "--budget",
        "0.1",
        "--data",
        str(small_records),
        "--profile",
        "x86-avx2",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    full = load_records(small_records, profile="x86-avx2").measured()
    subset = load_records(out)
    assert subset.profile == "x86-avx2" and set(subset.tasks) == set(full.tasks)
    for task, programs in subset:
        pool = {program_key(p.trace): p.latency for p in full.programs[task.key]}
        assert len(programs) == -(-len(pool) // 10)
        assert all(pool[program_key(p.trace)] == p.latency for p in programs)  # same measurements
    assert len(ms.database.JSONDatabase(work_dir=str(out)).get_all_tuning_records()) == len(subset)
    again = run_tcl(
        "sample",
        "--sampler",
        "rdu-d",
        "--budget",
        "0.1",
        "--data",
        str(small_records),
        "--profile",
        "x86-avx2",
        "--out",
        str(out),
    )
    assert again.returncode == 2 and "is not empty" in again.stderr


def test_unknown_sampler_lists_choices(tmp_path):
    proc = run_tcl(
        "sample", "--sampler", "rdx", "--data", str(BUNDLED), "--profile", "x86-avx2", "--out", str(tmp_path / "s")
    )
    assert (
        proc.returncode == 2 and "unknown sampler 'rdx'; choices: all, random, rdu, rdu-d, rdu-r, rdu-u" in proc.stderr
    )
    assert not (tmp_path / "s").exists()


def test_an_option_the_round_model_refuses_stops_before_round_1(tmp_path):
    proc = run_tcl(
        *("sample", "--sampler", "random", "--budget", "0.1", "--data", str(BUNDLED), "--profile", "x86-avx2"),
        *("--rounds", "2", "--model", "xgb", "--epochs", "2", "--out", str(tmp_path / "s")),
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "cost model 'xgb': bad options" in proc.stderr and "unknown option(s) ['epochs']" in proc.stderr
    assert not (tmp_path / "s").exists()
    common = ("sample", "--sampler", "random", "--data", str(BUNDLED), "--rounds", "2", "--model", "mlp")
    proc = run_tcl(*common, "--model-option", "widht=64", "--out", str(tmp_path / "s"))
    assert proc.returncode == 2 and "unknown option(s) ['widht']" in proc.stderr, proc.stderr
    twice = run_tcl(*common, "--model-option", "lr=0.01", "--model-option", "lr=0.1", "--out", str(tmp_path / "s"))
    assert twice.returncode == 2 and "--model-option lr is given twice" in twice.stderr, twice.stderr
    assert not (tmp_path / "s").exists()


@pytest.mark.slow  # ~40 s: three RDU samplings of data/bundled
def test_sampler_options_make_rdu_a_single_criterion_sampler(tmp_path, small_records):
    common = ("--budget", "0.05", "--data", str(small_records), "--profile", "x86-avx2")
    r_only = run_tcl("sample", "--sampler", "rdu-r", *common, "--out", str(tmp_path / "r"))
    options = run_tcl(
        "sample",
        "--sampler",
        "rdu",
        "--sampler-option",
        "w_d=0",
        "--sampler-option",
        "w_u=0.0",
        *common,
        "--out",
        str(tmp_path / "rdu"),
    )
    full = run_tcl("sample", "--sampler", "rdu", *common, "--out", str(tmp_path / "full"))
    assert r_only.returncode == options.returncode == full.returncode == 0, options.stderr
    picks = {
        name: {
            key: sorted(program_key(p.trace) for p in programs)
            for key, programs in load_records(tmp_path / name).programs.items()
        }
        for name in ("r", "rdu", "full")
    }
    assert picks["rdu"] == picks["r"] != picks["full"]
    bad = run_tcl("sample", "--sampler", "rdu", "--sampler-option", "w_u=-1", *common, "--out", str(tmp_path / "bad"))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "w_u must be a finite number >= 0" in bad.stderr
    assert not (tmp_path / "bad").exists()
