"""Transfer strategies, `tcl transfer` and `tcl adapt` on real bundled records (a small slice of
them, so every training is a few seconds) and real measurements of a tiny pool."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import BUNDLED, BUNDLED_POOL, run_tcl, start_tcl, wait_for_lines

from tcl.api.profiles import get_profile
from tcl.api.programs import MeasureResult
from tcl.learning.evaluation import load_checkpoint
from tcl.learning.transfer import load_platform, run_sequence, select_sample, transfer_once, transfer_step
from tcl.records.database import RECORD_FILE, load_records
from tcl.records.pools import load_pool, save_pool
from tcl.records.program_keys import program_key
from tcl.records.record_writer import RecordWriter
from tcl_plugins.transfer.base import listwise_kl

PROFILES = ("x86-avx512", "x86-avx2")
HELD_OUT = "bert-tiny"
TINY = {"epochs": 1}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Two platforms' records of the same 24 programs of 3 tasks (one of bert-tiny each)."""
    root = tmp_path_factory.mktemp("records")
    sets = {p: load_records(BUNDLED, profile=p) for p in PROFILES}
    first = sets[PROFILES[0]]
    held = [k for k, t in first.tasks.items() if HELD_OUT in t.networks][:1]
    kept = [k for k, t in first.tasks.items() if HELD_OUT not in t.networks][:2]
    for profile, records in sets.items():
        with RecordWriter(root / profile, profile=profile) as writer:
            target = get_profile(profile).target
            for key in held + kept:
                task = records.tasks[key]
                wanted = [program_key(p.trace) for p in first.programs[key] if p.ok][:24]
                by_key = {program_key(p.trace): p for p in records.programs[key]}
                entries = [
                    (by_key[k].trace, MeasureResult(run_secs=by_key[k].run_secs))
                    for k in wanted
                    if k in by_key and by_key[k].ok
                ]
                writer.add(task, entries, target=target)
    return root


def tiny_teacher(train, model: str, out: Path) -> Path:
    from tcl.api import discovery

    arch = {"layers": 1} if model == "mamba" else {}
    teacher = discovery.registry().create("cost_models", model, epochs=1, threads=1, verbose=False, **arch)
    teacher.fit(train, seed=0)
    teacher.save(out)
    return out


@pytest.fixture(scope="module")
def teacher(data, tmp_path_factory):
    train, _ = load_platform(data, PROFILES[0], [HELD_OUT])
    return tiny_teacher(train, "mamba", tmp_path_factory.mktemp("teacher") / "mamba")


@pytest.fixture(scope="module")
def target(data):
    train, _ = load_platform(data, PROFILES[1], [HELD_OUT])
    return select_sample(train, "random", 0.5, seed=0)


def test_listwise_kl_is_zero_only_for_the_same_ranking_distribution():
    t = torch.tensor([1.0, 2.0, 3.0, 0.5, 0.1])
    groups = torch.tensor([0, 0, 0, 1, 1])
    assert float(listwise_kl(t.clone(), t, groups)) == pytest.approx(0.0, abs=1e-6)
    assert float(listwise_kl(t + torch.tensor([0.0, 0.0, 0.0, 5.0, 5.0]), t, groups)) == pytest.approx(0.0, abs=1e-6)
    assert float(listwise_kl(t.flip(0), t, groups)) > 0.1


@pytest.mark.parametrize(
    "strategy,options",
    [
        ("continual-kd", {"distill_on": "labelled"}),
        ("continual-kd", {"distill_on": "pool", "lam": 2.0, "tau": 2.0}),
        ("fine-tune", {}),
        ("scratch", {}),
        ("mtl", {}),
        ("continual-kd-pc", {}),
        ("as-is", {}),
    ],
)
def test_each_strategy_makes_a_loadable_checkpoint(strategy, options, data, teacher, target, tmp_path):
    sample, rest = target
    source, _ = load_platform(data, PROFILES[0], [HELD_OUT])
    model_in = load_checkpoint(teacher, threads=1)
    model, seconds, trained = transfer_step(
        strategy, model_in, sample, unlabelled=rest, history={PROFILES[0]: source}, options={**TINY, **options}
    )
    model.save(tmp_path / "ckpt")
    loaded = load_checkpoint(tmp_path / "ckpt")
    task, programs = next(iter(sample))
    assert np.allclose(loaded.predict(task, programs), model.predict(task, programs), atol=1e-5)
    config = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    assert config["profile"] == PROFILES[1] and config["transfer"]["strategy"] == strategy
    assert seconds > 0
    if strategy == "as-is":  # the teacher unchanged
        assert np.allclose(loaded.predict(task, programs), model_in.predict(task, programs), atol=1e-5)
    if strategy == "mtl":
        # one head per platform: the target's is the network's decoder, the earlier one beside it
        assert config["heads"] == [PROFILES[0]] and list(loaded.heads) == [PROFILES[0]]
        assert trained == len(sample) + len(source)
        head = loaded.heads[PROFILES[0]]
        assert loaded.parameter_count() == model_in.parameter_count() + sum(t.numel() for t in head.values())
        assert not np.allclose(loaded.for_platform(PROFILES[0]).predict(task, programs), loaded.predict(task, programs))
    else:
        assert config["heads"] == [] and trained == len(sample)
        assert loaded.parameter_count() == model_in.parameter_count()


def test_continual_kd_moves_the_student_not_the_teacher(teacher, target):
    sample, rest = target
    model_in = load_checkpoint(teacher, threads=1)
    before = {k: v.clone() for k, v in model_in.module.state_dict().items()}
    student, _, _ = transfer_step("continual-kd", model_in, sample, unlabelled=rest, options=TINY)
    assert all(torch.equal(before[k], v) for k, v in model_in.module.state_dict().items())
    assert any(not torch.equal(before[k], v) for k, v in student.module.state_dict().items())
    assert student.parameter_count() == model_in.parameter_count()


def test_progress_compress_holds_what_mattered_and_carries_its_fisher(teacher, target, tmp_path):
    sample, rest = target
    model_in = load_checkpoint(teacher, threads=1)
    anchor = {n: p.detach().clone() for n, p in model_in.module.named_parameters()}

    options = {**TINY, "epochs": 8}
    free, _, _ = transfer_step("continual-kd-pc", model_in, sample, unlabelled=rest, options={**options, "ewc": 0.0})
    held, _, _ = transfer_step("continual-kd-pc", model_in, sample, unlabelled=rest, options={**options, "ewc": 100.0})

    def moved(model) -> float:  # how far the parameters that mattered (by the teacher's Fisher) went
        weight = free.fisher  # with ewc 0 and gamma 1: the teacher's Fisher plus the new one
        return sum(float((weight[n] * (p.detach() - anchor[n]) ** 2).sum()) for n, p in model.module.named_parameters())

    # the elastic penalty keeps the knowledge base nearer to what it was where it mattered
    assert moved(held) < 0.5 * moved(free)
    assert held.parameter_count() == model_in.parameter_count()
    assert held.info["transfer"]["fisher_from"] == "teacher's predictions"
    fisher = held.fisher
    assert set(fisher) == set(anchor) and all(torch.all(f >= 0) for f in fisher.values())
    assert sum(float(f.sum()) for f in fisher.values()) > 0
    # saved with the checkpoint, and the next platform's step starts from it
    held.save(tmp_path / "kb")
    loaded = load_checkpoint(tmp_path / "kb", threads=1)
    assert all(torch.equal(loaded.fisher[n], f) for n, f in fisher.items())
    again, _, _ = transfer_step("continual-kd-pc", loaded, sample, unlabelled=rest, options={**TINY, "gamma": 0.5})
    assert again.info["transfer"]["fisher_from"] == "teacher"


def test_transfer_once_scores_new_and_earlier_platform(data, teacher, tmp_path):
    fired = []

    class Observer:
        from tcl.api.hookspecs import hookimpl

        @hookimpl
        def tcl_on_transfer_step(self, strategy, profile, metrics):
            fired.append((strategy, profile, dict(metrics)))

    from tcl.api.discovery import registry

    observer = Observer()
    registry().manager.register(observer)
    try:
        result = transfer_once(
            strategy="continual-kd",
            teacher=teacher,
            profile=PROFILES[1],
            data_dir=data,
            out=tmp_path / "student",
            budget=0.5,
            sampler="random",
            held_out=[HELD_OUT],
            options=TINY,
        )
    finally:
        registry().manager.unregister(observer)
    assert result["programs_measured"] == 24  # half of 2 tasks x 24 programs
    for scores in (result["target"], result["earlier"][PROFILES[0]]):
        assert 0 < scores["top1"] <= scores["top5"] <= 1
    assert fired and fired[0][:2] == ("continual-kd", PROFILES[1]) and "target_top1" in fired[0][2]
    json.dumps(result)


def test_run_sequence_reports_forgetting_per_step(data, teacher, tmp_path):
    result = run_sequence(
        profiles=PROFILES,
        strategy="mtl",
        data_dir=data,
        budget=0.5,
        sampler="random",
        held_out_networks=[HELD_OUT],
        teacher=teacher,
        options=TINY,
        out_dir=tmp_path,
    )
    base, step = result["rows"]
    assert base["strategy"] == "base" and base["earlier"] == {} and base["target"]["top1"] > 0
    assert step["profile"] == PROFILES[1] and set(step["earlier"]) == {PROFILES[0]}
    assert step["parameters"] > base["parameters"]  # mtl grows by one head
    assert step["programs_measured"] == 24 and step["programs_trained"] == 24 + 48
    assert (tmp_path / f"1-{PROFILES[1]}" / "heads.pt").is_file()
    json.dumps(result)


def test_cli_transfer_json(data, teacher, tmp_path):
    out = tmp_path / "kd"
    proc = run_tcl(
        "transfer",
        "--strategy",
        "continual-kd",
        "--teacher",
        str(teacher),
        "--profile",
        PROFILES[1],
        "--data",
        str(data),
        "--held-out",
        HELD_OUT,
        "--budget",
        "0.25",
        "--epochs",
        "1",
        "--sampler",
        "random",
        "--lam",
        "0.5",
        "--out",
        str(out),
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["strategy"] == "continual-kd" and result["programs_measured"] == 12
    assert set(result["earlier"]) == {PROFILES[0]}
    assert json.loads((out / "config.json").read_text())["transfer"]["lam"] == 0.5


@pytest.mark.parametrize(
    "extra,expected",
    [
        (["--strategy", "continual-kd", "--model", "tlp"], "the teacher is a mamba model, not tlp"),
        (
            ["--strategy", "fine-tune", "--featurizer", "per-store"],
            "the teacher uses featurizer trace-seq, not per-store",
        ),
        (["--strategy", "fine-tune", "--lam", "1"], "transfer strategy 'fine-tune': bad options ['epochs', 'lam']"),
        (
            ["--strategy", "distill"],
            "unknown transfer strategy 'distill'; choices: as-is, continual-kd, continual-kd-pc, fine-tune, mtl, scratch",
        ),
        (
            ["--strategy", "continual-kd", "--distill-on", "pool", "--tau", "0"],
            "argument --tau: must be a finite number > 0, got 0.0",
        ),
        (["--strategy", "continual-kd", "--held-out", "alexnet"], "network(s) alexnet not in the records"),
    ],
)
def test_cli_errors_are_one_line(extra, expected, data, teacher, tmp_path, capsys):
    from tcl.cli.main import main  # in-process: the subprocess tests below check the real command

    try:
        code = main(
            [
                "transfer",
                "--teacher",
                str(teacher),
                "--profile",
                PROFILES[1],
                "--data",
                str(data),
                "--epochs",
                "1",
                "--sampler",
                "random",
                "--out",
                str(tmp_path / "never"),
                *extra,
            ]
        )
    except SystemExit as refused:  # an option's value is refused while the arguments are parsed
        code = refused.code
    err = capsys.readouterr().err
    assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "never").exists()


def test_cli_refuses_a_teacher_of_another_family_and_a_missing_teacher(data, tmp_path):
    train, _ = load_platform(data, PROFILES[0], [HELD_OUT])
    tlp = tiny_teacher(train, "tlp", tmp_path / "tlp")
    base = ["transfer", "--profile", PROFILES[1], "--data", str(data), "--out", str(tmp_path / "never")]
    proc = run_tcl(*base, "--strategy", "continual-kd", "--teacher", str(tlp), "--model", "mamba")
    assert proc.returncode == 2 and proc.stderr.strip() == (
        "tcl: error: the teacher is a tlp model, not mamba; give a mamba teacher or use --strategy scratch"
    )
    proc = run_tcl(*base, "--strategy", "continual-kd")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "tcl: error: transfer strategy continual-kd needs a teacher checkpoint (--teacher)"


@pytest.fixture(scope="module")
def tiny_pool(tmp_path_factory):
    """8 candidates of the bundled pool's quickest task."""
    pool = load_pool(BUNDLED_POOL)
    records = load_records(BUNDLED, profile="x86-avx2")
    key = min(
        (k for k in pool.tasks if k in records.tasks),
        key=lambda k: np.median([p.latency for p in records.programs[k] if p.ok]),
    )
    return save_pool(tmp_path_factory.mktemp("pool") / "pool", [(pool.tasks[key], pool.traces[key][:8])])


@pytest.mark.slow  # two real measuring runs: about 2.5 min on a busy 2-core box
def test_adapt_resumes_without_measuring_again(tiny_pool, teacher, tmp_path):
    out, work = tmp_path / "native", tmp_path / "work"
    args = [
        "adapt",
        "--profile",
        "x86-avx2",
        "--teacher",
        str(teacher),
        "--pool",
        str(tiny_pool),
        "--budget",
        "0.5",
        "--batch-size",
        "1",
        "--epochs",
        "1",
        "--out",
        str(out),
        "--work-dir",
        str(work),
    ]
    records = work / "records" / RECORD_FILE
    proc = start_tcl(*args)
    wait_for_lines(proc, records, 1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = records.read_bytes().count(b"\n")
    assert 1 <= done < 4 and not out.exists()
    rerun = run_tcl(*args, "--json")
    assert rerun.returncode == 0, rerun.stderr
    result = json.loads(rerun.stdout)
    assert result["already_measured"] == done and result["measured_now"] == 4 - done
    keys = [program_key(p.trace) for _, progs in load_records(work / "records") for p in progs]
    assert len(keys) == 4 == len(set(keys))
    assert load_checkpoint(out).info["transfer"]["strategy"] == "continual-kd"
    again = json.loads(run_tcl(*args, "--json").stdout)  # nothing left to measure
    assert again["measured_now"] == 0 and again["already_measured"] == 4


def test_adapt_without_a_pool_fails_in_one_line(teacher, tmp_path):
    proc = run_tcl("adapt", "--teacher", str(teacher), "--pool", str(tmp_path / "nope"), "--out", str(tmp_path / "x"))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "is not a candidate pool" in proc.stderr and not (tmp_path / "x").exists()
