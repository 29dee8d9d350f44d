"""Damaged and hostile input: every case ends in one line naming the file and exit status 2
(or is handled correctly), never a traceback, never a silently wrong result."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import BUNDLED, BUNDLED_POOL, run_tcl

from tcl.api.errors import TclError
from tcl.records.database import RECORD_FILE, WORKLOAD_FILE, load_records, pack_dir

PRETRAINED = Path(__file__).parent.parent / "plugins" / "pretrained" / "x86-avx2" / "mlp"
TARGET = {"kind": "llvm", "mcpu": "core-avx2"}
TRACE = [[], []]


def record_line(widx, run_secs) -> str:
    return json.dumps([widx, [TRACE, run_secs, TARGET, []]])


def write_db(path: Path, records: list[str], tasks: int = 2) -> Path:
    """A plain record directory written by hand (no TVM): ``tasks`` workloads, given record lines."""
    path.mkdir(parents=True, exist_ok=True)
    (path / WORKLOAD_FILE).write_text("".join(json.dumps([f"{i:08d}", "AAAA"]) + "\n" for i in range(tasks)))
    (path / RECORD_FILE).write_text("".join(line + "\n" for line in records))
    return path


def packed_db(tmp_path: Path) -> Path:
    src = write_db(tmp_path / "plain", [record_line(i % 2, [1e-4 * (i + 1)]) for i in range(400)])
    return pack_dir(src, tmp_path / "packed", packed=True)[0].parent


def cut_short(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def flip_bytes(path: Path) -> None:
    data = bytearray(path.read_bytes())
    for i in range(len(data) // 3, len(data) // 3 + 16):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def not_gzip(path: Path) -> None:
    path.write_bytes(b"this is not gzip data\n" * 10)


DAMAGE = {"cut short": cut_short, "bytes flipped": flip_bytes, "not gzip": not_gzip}


@pytest.mark.parametrize("damage", DAMAGE)
@pytest.mark.parametrize("name", [RECORD_FILE, WORKLOAD_FILE])
def test_damaged_gzip_is_one_error_naming_the_file(tmp_path, damage, name):
    db = packed_db(tmp_path)
    victim = db / (name + ".gz")
    DAMAGE[damage](victim)
    with pytest.raises(TclError, match=f"^{victim}: damaged gzip file"):
        load_records(db)


def _assert_one_line_error(proc, victim: Path) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tcl: error: {victim}: damaged gzip file"), proc.stderr


@pytest.mark.parametrize("damage", DAMAGE)
def test_cli_reports_damaged_gzip_in_one_line(tmp_path, damage):
    db = packed_db(tmp_path)
    victim = db / (RECORD_FILE + ".gz")
    DAMAGE[damage](victim)
    _assert_one_line_error(run_tcl("dataset", "info", str(db)), victim)
    if damage == "cut short":  # the commands share one reader; one damage each is enough here
        _assert_one_line_error(run_tcl("eval", "--model", str(PRETRAINED), "--data", str(db)), victim)
        _assert_one_line_error(
            run_tcl("train", "--model", "mlp", "--data", str(db), "--epochs", "1", "--out", str(tmp_path / "ckpt")),
            victim,
        )
        assert not (tmp_path / "ckpt").exists()


def test_damaged_pool_gzip_names_the_file(tmp_path):
    from tcl.records.pools import load_pool

    pool = Path(shutil.copytree(BUNDLED_POOL, tmp_path / "pool"))
    victim = pool / "candidates.json.gz"
    cut_short(victim)
    with pytest.raises(TclError, match=f"^{victim}: damaged gzip file"):
        load_pool(pool)


# ---- record values --------------------------------------------------------------------------

BAD_RUN_SECS = {
    "NaN": [float("nan")],
    "Infinity": [float("inf")],
    "negative": [-1e-4],
    "zero": [0.0],
    "null": None,
    "true": [True],
    "bare true": True,
    "abc": ["abc"],
    "bare abc": "abc",
    "nested": [[1]],
    "empty": [],
    "one bad repeat": [1e-4, float("nan")],
}


@pytest.mark.parametrize("case", BAD_RUN_SECS)
def test_unusable_run_secs_is_an_error_record_of_its_own_task(tmp_path, case):
    good = [record_line(0, [2e-4]), record_line(1, [3e-4])]
    db = write_db(tmp_path / "db", good + [record_line(1, BAD_RUN_SECS[case])])
    records = load_records(db)
    first, second = (records.programs[k] for k in ("00000000", "00000001"))
    assert len(first) == 1 and first[0].ok  # nothing handed to another task
    assert len(second) == 2 and second[0].ok
    bad = second[1]
    assert not bad.ok and bad.error.startswith("invalid: run_secs"), bad.error
    assert bad.run_secs is None


def test_failure_marker_is_a_failed_run_not_invalid(tmp_path):
    db = write_db(tmp_path / "db", [record_line(0, [1e10]), record_line(0, [1e-4])])
    failed = load_records(db).programs["00000000"][0]
    assert failed.error == "unknown"


@pytest.mark.parametrize("widx", [-1, 2, 99, "0", True, None, 0.5])
def test_bad_workload_index_names_file_and_line(tmp_path, widx):
    db = write_db(tmp_path / "db", [record_line(0, [1e-4]), record_line(widx, [1e-4])])
    with pytest.raises(TclError, match=f"^{db / RECORD_FILE}:2: workload index .* names none of the 2 workloads"):
        load_records(db)


BAD_TRACES = {
    "a string": ("abc", "the trace is not [instructions, decisions]"),
    "one part": ([[]], "the trace is not [instructions, decisions]"),
    "instruction a string": ([["GetSBlock"], []], "instruction 0 is not [kind, inputs, attributes, outputs]"),
    "instruction too short": ([[["GetSBlock", [], []]], []], "instruction 0 is not"),
    "decision past the end": ([[["GetSBlock", [], [], []]], [[5, 1]]], "decision [5, 1] is not"),
    "decision not a pair": ([[["GetSBlock", [], [], []]], [7]], "decision 7 is not"),
}


@pytest.mark.parametrize("case", BAD_TRACES)
def test_malformed_trace_names_file_and_line(tmp_path, case):
    trace, why = BAD_TRACES[case]
    bad = json.dumps([1, [trace, [1e-4], TARGET, []]])
    db = write_db(tmp_path / "db", [record_line(0, [1e-4]), bad])
    with pytest.raises(TclError, match=f"^{re.escape(str(db / RECORD_FILE))}:2: not a tuning record: {re.escape(why)}"):
        load_records(db)


def test_a_trace_tvm_cannot_replay_names_file_and_line(tmp_path):
    """Well-formed, but naming a block the workload lacks: found only when the per-store
    featurizer replays it, and still reported with the record's file and line."""
    import gzip

    src = BUNDLED / "x86-avx2"
    db = tmp_path / "db"
    db.mkdir()
    (db / WORKLOAD_FILE).write_bytes(gzip.decompress((src / (WORKLOAD_FILE + ".gz")).read_bytes()))
    with gzip.open(src / (RECORD_FILE + ".gz"), "rt") as fh:
        first = [line for line, _ in zip(fh, range(3))]
    assert all(line.startswith("[0,") for line in first) and '["matmul","main"]' in first[2]
    first[2] = first[2].replace('["matmul","main"]', '["no_such_block","main"]')
    (db / RECORD_FILE).write_text("".join(first))
    proc = run_tcl("eval", "--model", str(PRETRAINED), "--data", str(db))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"tcl: error: {db / RECORD_FILE}:3: per-store: cannot replay a trace of task "), line


def test_dataset_info_counts_invalid_records_and_says_why(tmp_path):
    lines = (
        [record_line(0, [1e-4]), record_line(0, [2e-4])]
        + [record_line(1, [-1.0])] * 3
        + [record_line(1, [float("nan")])]
    )
    db = write_db(tmp_path / "db", lines)
    proc = run_tcl("dataset", "info", str(db), "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)["profiles"]["(none)"]
    assert summary["programs"] == 6 and summary["measured_ok"] == 2
    assert summary["failures"] == {"invalid": 4}
    assert f"{db / RECORD_FILE}: 4 records hold no usable time" in proc.stderr
    assert "first at line 3: run_secs holds -1.0, not a finite positive time" in proc.stderr


def test_cli_bad_workload_index_is_one_line(tmp_path):
    db = write_db(tmp_path / "db", [record_line(-1, [1e-4])])
    proc = run_tcl("dataset", "info", str(db))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"tcl: error: {db / RECORD_FILE}:1: workload index -1 names none of the 2 workloads of this database"
    ]


def test_training_counts_invalid_records_apart_from_failed_runs(tmp_path):
    from tcl.learning.record_sets import clean_records

    lines = [record_line(0, [1e-4]), record_line(0, [1e10]), record_line(1, [-1.0]), record_line(1, "abc")]
    clean, counts = clean_records(load_records(write_db(tmp_path / "db", lines)))
    assert counts["failed"] == 1 and counts["nonfinite"] == 2
    assert list(clean.tasks) == ["00000000"] and len(clean) == 1


# ---- result directories appear whole or not at all ---------------------------------------------

TENSET_SAMPLE = Path(__file__).parent / "data" / "tenset_sample.json"


def big_tenset_file(path: Path, tasks: int = 100, copies: int = 24) -> Path:
    """Many TenSet records (the sample's lines under ``tasks`` distinct workload keys)."""
    lines = [json.loads(x) for x in TENSET_SAMPLE.read_text().splitlines() if x.strip()]
    with open(path, "w") as fh:
        for t in range(tasks):
            for _ in range(copies // len(lines) + 1):
                for line in lines:
                    line["i"][0][0] = json.dumps([f"{t:032x}", 1, t])
                    fh.write(json.dumps(line) + "\n")
    return path


def records_by_task(path: Path) -> dict[str, list]:
    return {task.key: [(json.dumps(p.trace), p.run_secs, p.error) for p in progs] for task, progs in load_records(path)}


def test_killed_import_leaves_no_directory_and_a_rerun_matches(tmp_path):
    from conftest import start_tcl, wait_for_lines

    from tcl.records.database import TENSET_RECORD_FILE
    from tcl.records.tenset import import_tenset

    src = big_tenset_file(tmp_path / "big.json")
    expected = records_by_task(import_tenset(src, tmp_path / "reference").out_dir)
    out = tmp_path / "runs" / "imp"
    proc = start_tcl("dataset", "import-tenset", str(src), "--out", str(out))
    try:
        wait_for_lines(proc, out.with_name("imp.partial") / TENSET_RECORD_FILE, 1)
    finally:
        proc.kill()
        proc.wait()
    assert not out.exists()
    info = run_tcl("dataset", "info", str(tmp_path / "runs"), "--json")
    assert json.loads(info.stdout)["databases"] == 0, info.stderr  # the leftover is not read as records
    again = run_tcl("dataset", "import-tenset", str(src), "--out", str(out))
    assert again.returncode == 0, again.stderr
    assert records_by_task(out) == expected
    assert not out.with_name("imp.partial").exists()


@pytest.mark.parametrize("content", ["", "\n\n# a comment only\n"])
def test_empty_tenset_file_is_an_error(tmp_path, content):
    empty = tmp_path / "empty.json"
    empty.write_text(content)
    proc = run_tcl("dataset", "import-tenset", str(empty), "--out", str(tmp_path / "imp"))
    assert proc.returncode == 2 and proc.stderr.strip() == f"tcl: error: {empty}: no TenSet records in it"
    assert not (tmp_path / "imp").exists()


@pytest.mark.slow  # about a minute: three loads of the bundled records
def test_killed_sample_leaves_no_subset_and_a_rerun_matches(tmp_path):
    from conftest import start_tcl, wait_for_lines

    from tcl.learning.sampling import active_learning_offline

    args = [
        "sample",
        "--sampler",
        "random",
        "--budget",
        "0.5",
        "--data",
        str(BUNDLED),
        "--profile",
        "x86-avx2",
        "--seed",
        "3",
    ]
    out = tmp_path / "subset"
    proc = start_tcl(*args, "--out", str(out))
    try:
        wait_for_lines(proc, out.with_name("subset.partial") / RECORD_FILE, 1)
    finally:
        proc.kill()
        proc.wait()
    assert not out.exists()
    again = run_tcl(*args, "--out", str(out))
    assert again.returncode == 0, again.stderr
    records = load_records(BUNDLED, profile="x86-avx2").measured()
    chosen = active_learning_offline(records, "random", 0.5, seed=3)
    expected = {key: sorted(json.dumps(records.programs[key][i].trace) for i in idx) for key, idx in chosen.items()}
    got = load_records(out)
    assert {key: sorted(json.dumps(p.trace) for p in progs) for key, progs in got.programs.items()} == expected


@pytest.mark.slow  # three short trainings on the idle bert-tiny records
def test_killed_training_leaves_no_checkpoint_and_a_rerun_matches_an_uninterrupted_one(tmp_path):
    import time

    import torch
    from conftest import IDLE, start_tcl

    args = ["train", "--model", "mlp", "--data", str(IDLE / "x86-avx2"), "--epochs", "8", "--seed", "5"]
    reference = tmp_path / "reference"
    start = time.monotonic()
    done = run_tcl(*args, "--out", str(reference))
    assert done.returncode == 0, done.stderr
    seconds = time.monotonic() - start
    out = tmp_path / "runs" / "ckpt"
    for fraction in (0.5, 0.9):  # while loading, while training or while saving
        proc = start_tcl(*args, "--out", str(out))
        try:
            proc.wait(timeout=fraction * seconds)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.returncode == 0:  # this machine finished sooner than the reference run
            shutil.rmtree(out)
            continue
        assert not out.exists()  # nothing that looks like a checkpoint
        leftovers = list(out.parent.iterdir()) if out.parent.exists() else []
        assert all(p.name.startswith(".") for p in leftovers), leftovers  # at most a hidden temporary
    again = run_tcl(*args, "--out", str(out))
    assert again.returncode == 0, again.stderr
    got, want = (torch.load(d / "weights.pt", weights_only=True) for d in (out, reference))
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)


# ---- options, configs, profiles and checkpoints are checked before any work ---------------------

ROOT = Path(__file__).parent.parent


@pytest.mark.parametrize(
    "args, message",
    [
        (["train", "--model", "mlp", "--batch-size", "0"], "argument --batch-size: must be a whole number >= 1, got 0"),
        (
            ["train", "--model", "mlp", "--batch-size", "-1"],
            "argument --batch-size: must be a whole number >= 1, got -1",
        ),
        (["train", "--model", "mlp", "--epochs", "0"], "argument --epochs: must be a whole number >= 1, got 0"),
        (["train", "--model", "mlp", "--threads", "-1"], "argument --threads: must be a whole number >= 1, got -1"),
        (["train", "--model", "mlp", "--epochs", "one"], "argument --epochs: expected a number, got 'one'"),
        (
            ["collect", "--profile", "x86-avx2", "--network", "bert-tiny", "--pool-size", "4", "--max-tasks", "0"],
            "argument --max-tasks: must be a whole number >= 1, got 0",
        ),
        (
            ["collect", "--profile", "x86-avx2", "--network", "bert-tiny", "--pool-size", "4", "--batch-size", "0"],
            "argument --batch-size: must be a whole number >= 1, got 0",
        ),
        (
            ["collect", "--profile", "x86-avx2", "--network", "bert-tiny", "--pool-size", "4", "--budget", "0"],
            "argument --budget: must be a fraction in (0, 1] or a whole count of programs, got 0.0",
        ),
        (
            ["sample", "--sampler", "random", "--budget", "2.5"],
            "argument --budget: must be a fraction in (0, 1] or a whole count of programs, got 2.5",
        ),
        (
            ["sample", "--sampler", "random", "--budget", "nan"],
            "argument --budget: must be a fraction in (0, 1] or a whole count of programs, got nan",
        ),
    ],
)
def test_numeric_options_out_of_range_are_one_line(tmp_path, args, message):
    out = tmp_path / "out"
    proc = run_tcl(*args, "--data", str(BUNDLED), "--out", str(out))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr, proc.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["tune", "--network", "bert-tiny", "--profile", "native", "--trials", "-1"], "--trials: must be a whole"),
        (["tune", "--network", "bert-tiny", "--profile", "native", "--trials", "4", "--repeats", "0"], "--repeats"),
        (["quickstart", "--budget", "0"], "--budget: must be a fraction in (0, 1]"),
        (["quickstart", "--population", "-3"], "--population: must be a whole number >= 1"),
        (
            ["collect", "--profile", "x86-avx2", "--network", "bert-tiny", "--pool-size", "4", "--pool-random", "1.5"],
            "--pool-random: must be a fraction in [0, 1]",
        ),
        (["train", "--model", "mlp", "--data", str(BUNDLED), "--valid-fraction", "1"], "must be a fraction in [0, 1)"),
        (
            ["transfer", "--profile", "x86-avx2", "--data", str(BUNDLED), "--tau", "0"],
            "--tau: must be a finite number > 0",
        ),
    ],
)
def test_tuning_and_training_options_out_of_range_are_one_line(tmp_path, args, message):
    out = tmp_path / "out"
    proc = run_tcl(*args, "--out", str(out))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr, proc.stderr
    assert not out.exists()


def test_train_refuses_a_record_directory_as_out_before_training(tmp_path):
    data = Path(shutil.copytree(BUNDLED / "x86-generic", tmp_path / "data"))
    before = sorted(p.name for p in data.iterdir())
    proc = run_tcl("train", "--model", "mlp", "--data", str(data), "--out", str(data), "--epochs", "1", timeout=60)
    assert proc.returncode == 2
    assert (
        proc.stderr.strip() == f"tcl: error: {data}: is a non-empty directory that is not a checkpoint; "
        "choose a new checkpoint directory"
    )
    assert sorted(p.name for p in data.iterdir()) == before


def _broken_checkpoint(tmp_path: Path, name: str, weights: bytes | None = None, **config) -> Path:
    ckpt = Path(shutil.copytree(PRETRAINED, tmp_path / name))
    if weights is not None:
        (ckpt / "weights.pt").write_bytes(weights)
    cfg = json.loads((ckpt / "config.json").read_text())
    for key, value in config.items():
        if key in cfg.get("hyper_parameters", {}):
            cfg["hyper_parameters"][key] = value
        else:
            cfg[key] = value
    (ckpt / "config.json").write_text(json.dumps(cfg))
    return ckpt


@pytest.mark.parametrize(
    "case, change, message",
    [
        ("random weights", dict(weights=bytes(range(256)) * 40), "weights.pt: not a readable torch weights file"),
        ("empty weights", dict(weights=b""), "weights.pt: not a readable torch weights file"),
        (
            "hidden text",
            dict(hidden="abc"),
            "config.json: hyper_parameters: cost model mlp option hidden must be a whole number >= 1, got 'abc'",
        ),
        ("epochs zero", dict(epochs=0), "config.json: hyper_parameters: cost model option epochs must be a whole"),
        ("version text", dict(format_version="x"), "config.json: format_version must be a whole number, got 'x'"),
        (
            "featurizer unknown",
            dict(featurizer={"name": "sequence", "version": "1"}),
            "config.json: featurizer: unknown featurizer 'sequence'; choices: ",
        ),
    ],
)
def test_broken_checkpoint_is_one_line_naming_the_file(tmp_path, case, change, message):
    ckpt = _broken_checkpoint(tmp_path, case.replace(" ", "-"), **change)
    proc = run_tcl("eval", "--model", str(ckpt), "--data", str(BUNDLED / "x86-avx2"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tcl: error: {ckpt}/") and message in lines[0], proc.stderr


def _profile_dir(tmp_path: Path, name: str, *texts: bytes) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for i, text in enumerate(texts):
        (folder / f"p{i}.toml").write_bytes(text)
    return folder


def _profile(**replace: str) -> bytes:
    text = (
        (ROOT / "hardware_profiles" / "rpc-example.toml").read_text().replace('name = "rpc-example"', 'name = "mine"')
    )
    for old, new in replace.items():
        text = text.replace(old, new)
    return text.encode()


@pytest.mark.parametrize(
    "case, texts, message",
    [
        (
            "bogus kind",
            [_profile(**{'kind = "llvm"': 'kind = "bogus"'})],
            'p0.toml: [target]: TVM does not accept it: Target kind "bogus" is not defined',
        ),
        (
            "unknown key",
            [_profile(**{"mcpu =": "mcpux ="})],
            "p0.toml: [target]: TVM does not accept it: Unknown config option 'mcpux'",
        ),
        ("not utf-8", [_profile() + b'note = "\xff\xfe"\n'], "p0.toml: not UTF-8 text"),
        (
            "num-cores false",
            [_profile(**{"num-cores = 2": "num-cores = false"})],
            "p0.toml: key 'target.num-cores': expected a positive integer or \"auto\", got False",
        ),
        ("same name twice", [_profile(), _profile()], "p1.toml: profile name 'mine' is also the name in "),
    ],
)
def test_bad_profile_is_refused_when_listed(tmp_path, case, texts, message):
    folder = _profile_dir(tmp_path, case.replace(" ", "-"), *texts)
    proc = run_tcl("--profiles-dir", str(folder), "profiles")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tcl: error: {folder}/") and message in lines[0], proc.stderr


@pytest.mark.parametrize(
    "case, edit, message",
    [
        (
            "misspelt table",
            ("[experiment]", "[experimnet]"),
            "no [experiment] table; did you mean [experiment] instead of [experimnet]?",
        ),
        (
            "epochs text",
            (
                "epochs = 1\nbatch_size = 256\n\n[models.options.mamba]",
                'epochs = "one"\nbatch_size = 256\n\n[models.options.mamba]',
            ),
            "options of cost model tlp: cost model option epochs must be a whole number >= 1, got 'one'",
        ),
        (
            "threads negative",
            ("seeds = [0]", "seeds = [0]\nthreads = -1"),
            "[experiment] threads must be a whole number >= 1, got -1",
        ),
        ("jobs zero", ("seeds = [0]", "seeds = [0]\njobs = 0"), "[experiment] jobs must be a whole number >= 1, got 0"),
    ],
)
def test_run_check_refuses_what_the_run_would_fail_on(tmp_path, case, edit, message):
    text = (ROOT / "configs" / "smoke-models.toml").read_text().replace('"../data', f'"{ROOT}/data')
    assert edit[0] in text
    config = tmp_path / "c.toml"
    config.write_text(text.replace(edit[0], edit[1], 1))
    proc = run_tcl("run", "--check", str(config))
    assert proc.returncode == 2 and proc.stderr.strip() == f"tcl: error: {config}: {message}", proc.stderr
    out = tmp_path / "out"
    again = run_tcl("run", str(config), "--out", str(out))
    assert again.returncode == 2 and not out.exists()  # refused before config.resolved.json is written


@pytest.mark.parametrize("budget", ["0", "-0.5", "2.5"])
def test_zero_or_partial_budget_in_a_config_is_refused_by_check(tmp_path, budget):
    text = (ROOT / "configs" / "smoke-sampling.toml").read_text().replace('"../data', f'"{ROOT}/data')
    assert "budget = 0.05" in text
    config = tmp_path / "c.toml"
    config.write_text(text.replace("budget = 0.05", f"budget = {budget}"))
    proc = run_tcl("run", "--check", str(config))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert (
        proc.stderr.startswith(f"tcl: error: {config}: ")
        and "budget must be a fraction in (0, 1] or a whole count of programs" in proc.stderr
    ), proc.stderr
