"""`tcl train` and `tcl eval` on the bundled measured data (real records, tiny training)."""

from __future__ import annotations

import json
import signal
import time

import numpy as np
import pytest
import torch
from conftest import BUNDLED, run_tcl, start_tcl, tcl_env

from tcl.records.database import load_records
from tcl.records.feature_cache import cache_files


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, small_records):
    out = tmp_path_factory.mktemp("ckpt") / "tlp"
    proc = run_tcl(
        "train",
        "--model",
        "tlp",
        "--data",
        str(small_records),
        "--profile",
        "x86-avx2",
        "--held-out",
        "bert-tiny",
        "--epochs",
        "2",
        "--batch-size",
        "128",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    assert "held-out networks bert-tiny: top1" in proc.stdout
    return out


def test_train_writes_a_checkpoint(checkpoint):
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["model"] == "tlp" and config["profile"] == "x86-avx2"
    assert config["featurizer"]["name"] == "trace-seq"
    assert (checkpoint / "weights.pt").is_file()


@pytest.mark.slow  # ~27 s: three evaluations (other eval tests stay in the default run)
def test_eval_prints_metrics_for_all_or_some_networks(checkpoint, small_records):
    args = ["eval", "--model", str(checkpoint), "--data", str(small_records), "--profile", "x86-avx2", "--json"]
    proc = run_tcl(*args)
    assert proc.returncode == 0, proc.stderr
    everything = json.loads(proc.stdout)
    assert everything["tasks"] >= 2
    for key in ("top1", "top5", "pairwise", "top1_per_network"):
        assert 0.0 <= everything[key] <= 1.0
    assert everything["top5"] >= everything["top1"]
    assert "warning" not in proc.stderr

    bert = json.loads(run_tcl(*args, "--network", "bert-tiny", "--per-task").stdout)
    held = [t for t in load_records(small_records, profile="x86-avx2").tasks.values() if "bert-tiny" in t.networks]
    assert bert["tasks"] == len(held) < everything["tasks"]
    assert sorted(t["task"] for t in bert["per_task"]) == sorted(t.name for t in held)
    own = [t["top1"] for t in bert["per_task"]]
    assert all(0 < v <= 1 for v in own)
    assert min(own) <= bert["top1"] <= max(own)  # the pooled score is a weighted mean of the tasks' own
    shares = [t["shortfall_share"] for t in bert["per_task"]]  # largest first, summing to 1 (0: no shortfall)
    assert shares == sorted(shares, reverse=True) and sum(shares) in (pytest.approx(1.0), 0.0)
    assert all(t["best_ms"] > 0 for t in bert["per_task"])
    proc = run_tcl(*args, "--network", "bert-tiyn")
    assert proc.returncode == 2 and "bert-tiyn not in the records; networks there: bert-tiny" in proc.stderr


def test_eval_on_another_profile_warns(checkpoint, small_records):
    proc = run_tcl("eval", "--model", str(checkpoint), "--data", str(small_records), "--profile", "x86-avx512")
    assert proc.returncode == 0, proc.stderr
    assert "trained on profile x86-avx2 but the records are of x86-avx512" in proc.stderr


def test_a_profile_the_records_do_not_hold_is_named_with_the_ones_they_do(checkpoint, small_records, tmp_path):
    for args in (
        ["eval", "--model", str(checkpoint)],
        ["train", "--model", "mlp", "--out", str(tmp_path / "never")],
    ):
        proc = run_tcl(*args, "--data", str(small_records), "--profile", "x86-av2")
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert f"{small_records} holds no records of profile 'x86-av2'; it holds x86-avx2" in proc.stderr
    assert not (tmp_path / "never").exists()


def test_an_interrupted_training_resumes_to_the_weights_of_an_unbroken_one(small_records, tmp_path):
    args = ["train", "--model", "tlp", "--data", str(small_records), "--profile", "x86-avx2"]
    args += ["--held-out", "bert-tiny", "--epochs", "2", "--batch-size", "128"]
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    proc = run_tcl(*args, "--out", str(whole))
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "whole.training-state.pt").exists()

    log = tmp_path / "broken.log"
    with open(log, "wb") as fh:
        proc = start_tcl(*args, "--out", str(broken), stderr=fh)
        deadline = time.monotonic() + 300
        while b"epoch 1/2" not in log.read_bytes():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 130
    state = tmp_path / "broken.training-state.pt"
    assert state.is_file() and not broken.exists()

    other = run_tcl(*args, "--seed", "1", "--out", str(broken))
    assert other.returncode == 2 and state.is_file()
    assert f"{state}: holds the state of a training with other data, options or seed" in other.stderr

    proc = run_tcl(*args, "--out", str(broken))
    assert proc.returncode == 0, proc.stderr
    assert "] resuming after epoch 1 (state in" in proc.stderr and not state.exists()
    resumed_epochs = [line for line in proc.stderr.splitlines() if "] epoch " in line]
    assert len(resumed_epochs) == 1 and "] epoch 2/2 " in resumed_epochs[0]
    a = torch.load(whole / "weights.pt", weights_only=True)
    b = torch.load(broken / "weights.pt", weights_only=True)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_eval_rejects_a_non_checkpoint(tmp_path):
    proc = run_tcl("eval", "--model", str(tmp_path), "--data", str(BUNDLED))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"tcl: error: {tmp_path}: not a checkpoint (no config.json)"


def test_train_unknown_model_lists_choices(tmp_path):
    proc = run_tcl("train", "--model", "gpt", "--data", str(BUNDLED), "--out", str(tmp_path / "x"))
    assert proc.returncode == 2 and "unknown cost model 'gpt'; choices: ensemble, mamba, mlp, tlp, xgb" in proc.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.slow  # about 2 minutes: one training and two evaluations on data/idle
def test_a_split_file_holds_out_its_test_networks_and_validates_on_its_validation_networks(tmp_path):
    from conftest import IDLE

    from tcl.learning.record_sets import split_by_network

    split = tmp_path / "split.toml"
    split.write_text(
        'format = "tcl-split"\nversion = 1\ntrain = ["resnet-18"]\nvalidation = ["vit-tiny"]\ntest = ["bert-tiny"]\n'
    )
    data = IDLE / "x86-avx2"
    out = tmp_path / "mlp"
    proc = run_tcl(
        "train", "--model", "mlp", "--data", str(data), "--split", str(split), "--epochs", "1", "--out", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    records = load_records(data).measured()
    rest, held = split_by_network(records, ["bert-tiny"])
    train, valid = split_by_network(rest, ["vit-tiny"])
    assert f"trained mlp on {len(train.tasks)} tasks" in proc.stdout
    assert f"validated on {len(valid.tasks)} tasks" in proc.stdout and "held-out networks bert-tiny:" in proc.stdout
    by_split, by_name = (
        json.loads(run_tcl("eval", "--model", str(out), "--data", str(data), *how, "--json").stdout)
        for how in (["--split", str(split)], ["--network", "bert-tiny"])
    )
    assert by_split["top1"] == by_name["top1"] and by_split["tasks"] == len(held.tasks)
    both = run_tcl(
        "train",
        "--model",
        "mlp",
        "--data",
        str(data),
        "--split",
        str(split),
        "--held-out",
        "x",
        "--out",
        str(tmp_path / "n"),
    )
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


@pytest.fixture(scope="module")
def two_tasks(tmp_path_factory):
    """The bundled x86-avx2 records of their first two tasks (per-store features are slow)."""
    import gzip

    from tcl.records.database import RECORD_FILE, WORKLOAD_FILE

    data = tmp_path_factory.mktemp("two-tasks")
    src = BUNDLED / "x86-avx2"
    (data / WORKLOAD_FILE).write_bytes(gzip.decompress((src / (WORKLOAD_FILE + ".gz")).read_bytes()))
    with gzip.open(src / (RECORD_FILE + ".gz"), "rt") as fh:
        (data / RECORD_FILE).write_text("".join(line for line in fh if line.startswith(("[0,", "[1,"))))
    return data


def test_xgb_trains_from_the_cli_with_the_default_threads(two_tasks, tmp_path):
    """The CLI always passes its --threads hint; xgb takes it as XGBoost's nthread."""
    out = tmp_path / "xgb"
    proc = run_tcl("train", "--model", "xgb", "--data", str(two_tasks), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "trained xgb on" in proc.stdout
    assert json.loads((out / "config.json").read_text())["hyper_parameters"]["nthread"] == 1


@pytest.mark.slow  # ~55 s: a training and three evaluations (the cache's own tests stay in the default run)
def test_train_and_eval_read_the_feature_cache_unless_told_not_to(two_tasks, tmp_path):
    """xgb's per-store features replay each program's trace: what the cache saves. An eval reads
    the entries the cache holds (emptied ones change its scores); --no-feature-cache ignores them."""
    cache = tmp_path / "cache"
    env = tcl_env(TCL_CACHE_DIR=str(cache))
    out = tmp_path / "xgb"
    proc = run_tcl("train", "--model", "xgb", "--data", str(two_tasks), "--out", str(out), env=env)
    assert proc.returncode == 0, proc.stderr
    assert cache_files(cache / "features")  # the training tasks' features
    args = ("eval", "--model", str(out), "--data", str(two_tasks), "--json")
    first = json.loads(run_tcl(*args, env=env).stdout)
    entries = cache_files(cache / "features")
    for path in entries:  # same keys, features all zero: every program looks alike
        with np.load(path) as z:
            arrays = {k: (z[k] if k in ("meta", "offsets") else np.zeros_like(z[k])) for k in z.files}
        with open(path, "wb") as fh:
            np.savez(fh, **arrays)
    emptied = json.loads(run_tcl(*args, env=env).stdout)
    assert cache_files(cache / "features") == entries
    assert emptied["pairwise"] != first["pairwise"]
    fresh = json.loads(run_tcl(*args, "--no-feature-cache", env=env).stdout)
    assert fresh == first


def test_an_ensemble_of_named_members_trains_each_with_its_own_seed(two_tasks, tmp_path):
    out = tmp_path / "ensemble"
    args = ["train", "--model", "ensemble", "--data", str(two_tasks), "--epochs", "1", "--out", str(out)]
    proc = run_tcl(*args, "--option", "members=tlp,tlp", "--seed", "3")
    assert proc.returncode == 0, proc.stderr
    config = json.loads((out / "config.json").read_text())
    assert [m["model"] for m in config["members"]] == ["tlp", "tlp"]
    seeds = [json.loads((out / m["dir"] / "config.json").read_text())["seed"] for m in config["members"]]
    assert seeds == [3, 4]
    for option, message in [
        ("members=tlp", "members must name two or more cost models or checkpoints, got 'tlp'"),
        ("=tlp", "argument --option: expected KEY=VALUE with KEY a name, got '=tlp'"),
        ("members", "argument --option: expected KEY=VALUE with KEY a name, got 'members'"),
    ]:
        proc = run_tcl(*args[:-1], str(tmp_path / "never"), "--option", option)
        assert proc.returncode == 2 and message in proc.stderr and not (tmp_path / "never").exists(), proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.slow  # ~55 s: a training and an evaluation on data/bundled
def test_train_scores_the_held_out_network_as_eval_does(tmp_path):
    # gpt-block's bundled records hold failed programs: both commands count them as infinitely slow
    out = tmp_path / "tlp"
    common = ("--data", str(BUNDLED), "--profile", "x86-avx2")
    proc = run_tcl("train", "--model", "tlp", *common, "--held-out", "gpt-block", "--epochs", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line.startswith("held-out networks gpt-block:"))
    said = dict(item.rsplit(" ", 1) for item in line.split(": ", 1)[1].split(", "))
    scored = json.loads(run_tcl("eval", "--model", str(out), *common, "--network", "gpt-block", "--json").stdout)
    for key in ("top1", "top5", "pairwise", "tasks", "programs"):
        assert said[key] == (f"{scored[key]:.4f}" if isinstance(scored[key], float) else str(scored[key])), key
