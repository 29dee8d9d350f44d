"""Active-learning rounds (select -> measure or look up -> train -> select): offline on the
bundled records with a real tiny TLP model, online with real measurements of a small matmul."""

from __future__ import annotations

import pytest
from conftest import BUNDLED, matmul_module, run_tcl

from tcl.api.errors import TclError
from tcl.learning.sampling import active_learning_offline, round_quotas, sample_offline
from tcl.records.database import load_records
from tcl.records.pools import make_task
from tcl.records.record_writer import RecordWriter

TINY = {"epochs": 1, "batch_size": 64, "mc_passes": 2, "threads": 1, "verbose": False}


@pytest.fixture(scope="module")
def records():
    """Three bundled tasks, 40 measured programs each."""
    full = load_records(BUNDLED, profile="x86-avx2").measured()
    keys = list(full.tasks)[:3]
    return full.subset(keys, indices={k: range(40) for k in keys})


def test_round_quotas_sum_to_the_budget():
    assert round_quotas(20, 3) == [7, 7, 6]
    assert round_quotas(2, 4) == [1, 1, 0, 0]
    assert round_quotas(0, 2) == [0, 0]
    with pytest.raises(TclError, match="rounds must be at least 1"):
        round_quotas(5, 0)


def test_rounds_spend_exactly_the_budget_and_repeat_per_seed(records):
    picks = active_learning_offline(records, "rdu", 0.25, rounds=3, model_name="tlp", model_options=TINY, seed=1)
    assert {k: len(v) for k, v in picks.items()} == {k: 10 for k in records.tasks}
    assert all(len(set(v)) == 10 and v == sorted(v) for v in picks.values())
    again = active_learning_offline(records, "rdu", 0.25, rounds=3, model_name="tlp", model_options=TINY, seed=1)
    assert again == picks
    # the model trained after round 1 changes what later rounds pick
    one_shot = active_learning_offline(records, "rdu", 0.25, rounds=1, seed=1)
    assert one_shot != picks and all(len(v) == 10 for v in one_shot.values())


def test_a_sampler_that_takes_no_model_gets_none_trained_between_rounds(records):
    lines = []
    picks = active_learning_offline(
        records, "rdu-d", 0.25, rounds=2, model_name="tlp", model_options=TINY, progress=lines.append
    )
    assert all(len(v) == 10 for v in picks.values())
    assert lines and not any("training" in line for line in lines)  # rdu-d embeds with trace-seq features
    assert picks == active_learning_offline(records, "rdu-d", 0.25, rounds=2)


@pytest.mark.parametrize("budget, expected", [(1.0, 40), (500, 40), (3, 3)])
def test_budget_edges(records, budget, expected):
    picks = active_learning_offline(records, "rdu", budget, rounds=4, model_name="tlp", model_options=TINY)
    assert all(len(v) == expected for v in picks.values())


def test_a_zero_budget_is_refused_before_any_work(records):
    with pytest.raises(TclError, match="budget must be a fraction in"):
        active_learning_offline(records, "rdu", 0, rounds=4, model_name="tlp", model_options=TINY)


def test_sample_cli_rounds_write_the_subset(records, tmp_path):
    data = tmp_path / "data"
    sample_offline(records, "all", 1.0, data, target={"kind": "llvm", "mcpu": "core-avx2"})
    out = tmp_path / "subset"
    proc = run_tcl(
        "sample",
        "--sampler",
        "rdu",
        "--budget",
        "0.1",
        "--data",
        str(data),
        "--rounds",
        "2",
        "--model",
        "tlp",
        "--epochs",
        "1",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    assert "chose 12 of 120 programs in 3 tasks in 2 rounds" in proc.stdout
    assert "round 2/2: training tlp" in proc.stderr
    assert {k: len(v) for k, v in load_records(out).programs.items()} == {k: 4 for k in records.tasks}
    bad = run_tcl(
        "sample",
        "--sampler",
        "rdu",
        "--data",
        str(data),
        "--rounds",
        "2",
        "--model",
        "gpt",
        "--out",
        str(tmp_path / "x"),
    )
    assert bad.returncode == 2 and "unknown cost model 'gpt'; choices: ensemble, mamba, mlp, tlp, xgb" in bad.stderr
    zero = run_tcl("sample", "--sampler", "rdu", "--data", str(data), "--rounds", "0", "--out", str(tmp_path / "y"))
    assert (
        zero.returncode == 2
        and zero.stderr.strip()
        == "tcl sample: error: argument --rounds: must be a whole number >= 1, got 0 (see --help)"
    )


@pytest.mark.slow  # ~40 s: online rounds that measure and train (tcl sample's rounds stay in the default run)
def test_collect_in_rounds_measures_the_budget_and_resumes(tmp_path):
    workloads = tmp_path / "workloads"
    with RecordWriter(workloads, manifest=False) as writer:
        writer.add_workload(make_task(matmul_module(), name="matmul64"))
    out = tmp_path / "records"
    args = [
        "collect",
        "--profile",
        "x86-avx2",
        "--network",
        str(workloads),
        "--pool-size",
        "8",
        "--out",
        str(out),
        "--sampler",
        "rdu",
        "--rounds",
        "2",
        "--model",
        "tlp",
        "--epochs",
        "1",
    ]
    proc = run_tcl(*args, "--budget", "0.5")
    assert proc.returncode == 0, proc.stderr
    assert "measured 4 programs" in proc.stdout and "round 2/2: training tlp" in proc.stderr
    assert len(load_records(out)) == 4
    again = run_tcl(*args, "--budget", "0.5")
    assert again.returncode == 0 and "measured 0 programs" in again.stdout and "training" not in again.stderr


def test_a_sampler_object_breaking_its_contract_is_named_as_the_user_named_it(records):
    from tcl.api.interfaces import Sampler

    class Repeats(Sampler):  # a third-party class that sets no ``name``
        def select(self, task, pool, budget, *, measured=(), model=None, seed=0):
            return [0, 0]

    with pytest.raises(
        TclError, match="^sampler 'author-repeats' broke its contract: returned an index more than once"
    ):
        active_learning_offline(records, Repeats(), 2, sampler_name="author-repeats")
    with pytest.raises(TclError, match="^sampler 'Repeats' broke its contract"):
        active_learning_offline(records, Repeats(), 2)
