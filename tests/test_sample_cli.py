"""`tcl sample`: offline subsets of the bundled records, readable by TVM and by `tcl train`."""

from __future__ import annotations

from pathlib import Path

from conftest import run_tcl
from tcl.database import load_records
from tcl.pools import program_key

BUNDLED = Path(__file__).resolve().parents[1] / "data" / "bundled"


def test_rdu_subset_is_ten_percent_per_task_and_loads_in_tvm(tmp_path):
    import tvm.s_tir.meta_schedule as ms

    out = tmp_path / "subset"
    proc = run_tcl("sample", "--sampler", "rdu-d", "--budget", "0.1", "--data", str(BUNDLED),
                   "--profile", "x86-avx2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    full = load_records(BUNDLED, profile="x86-avx2").measured()
    subset = load_records(out)
    assert subset.profile == "x86-avx2" and set(subset.tasks) == set(full.tasks)
    for task, programs in subset:
        pool = {program_key(p.trace): p.latency for p in full.programs[task.key]}
        assert len(programs) == -(-len(pool) // 10)
        assert all(pool[program_key(p.trace)] == p.latency for p in programs)  # same measurements
    assert len(ms.database.JSONDatabase(work_dir=str(out)).get_all_tuning_records()) == len(subset)
    again = run_tcl("sample", "--sampler", "rdu-d", "--budget", "0.1", "--data", str(BUNDLED),
                    "--profile", "x86-avx2", "--out", str(out))
    assert again.returncode == 2 and "is not empty" in again.stderr


def test_unknown_sampler_lists_choices(tmp_path):
    proc = run_tcl("sample", "--sampler", "rdx", "--data", str(BUNDLED), "--profile", "x86-avx2",
                   "--out", str(tmp_path / "s"))
    assert proc.returncode == 2 and "unknown sampler 'rdx'; choices: all, random, rdu, rdu-d, rdu-r, rdu-u" in proc.stderr
    assert not (tmp_path / "s").exists()
