"""The feature cache's size cap (least recently used files go first) and `tcl cache`, on real
TenSet records featurized by the real trace-seq featurizer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import run_tcl, run_tcl_json, tcl_env

from tcl.api.programs import ProgramSet
from tcl.records.database import load_records
from tcl.records.feature_cache import cache_files, cache_usage, cached_features, max_cache_bytes
from tcl.records.tenset import import_tenset
from tcl_plugins.featurizers.trace_seq import TraceSeqFeaturizer

TENSET_SAMPLE = Path(__file__).parent / "data" / "tenset_sample.json"


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    out = tmp_path_factory.mktemp("tenset") / "imp"
    import_tenset(TENSET_SAMPLE, out, profile="tenset-avx2")
    rs = load_records(out)
    assert len(rs.tasks) >= 2
    return rs


def only(records: ProgramSet, key: str) -> ProgramSet:
    out = ProgramSet()
    out.add(records.tasks[key], records.programs[key])
    return out


def entry_of(cache: Path, before: set[Path]) -> Path:
    [path] = set(cache_files(cache)) - before
    return path


def test_the_cap_evicts_the_least_recently_used_files(records, tmp_path, monkeypatch):
    cache = tmp_path / "features"
    monkeypatch.setenv("TCL_CACHE_MAX_MB", "0")  # no cap while filling
    a, b = sorted(records.tasks)[:2]
    entries = [(TraceSeqFeaturizer(), a), (TraceSeqFeaturizer(), b), (TraceSeqFeaturizer(length=32), a)]
    files = []
    for i, (featurizer, key) in enumerate(entries):  # written in order, then dated oldest first
        before = set(cache_files(cache))
        cached_features(featurizer, only(records, key), cache)
        files.append(entry_of(cache, before))
        os.utime(files[-1], (1_000_000 + i, 1_000_000 + i))
    _, total = cache_usage(cache)

    cached_features(entries[0][0], only(records, a), cache)  # a hit: the oldest file becomes the most recent
    assert os.path.getmtime(files[0]) > 1_000_002

    monkeypatch.setenv("TCL_CACHE_MAX_MB", str(total / 1024 / 1024))
    cap = max_cache_bytes()
    before = set(cache_files(cache))
    cached_features(TraceSeqFeaturizer(length=16), only(records, b), cache)  # a new entry passes the cap
    new = entry_of(cache, before - {files[1]})
    assert not files[1].exists()  # least recently used: gone
    assert files[0].exists() and new.exists()  # just used, just written: kept
    assert cache_usage(cache)[1] <= cap


def test_cache_command_shows_and_clears_only_its_files(records, tmp_path):
    root = tmp_path / "c"
    cache = root / "features"
    cached_features(TraceSeqFeaturizer(), records, cache)
    n, size = cache_usage(cache)
    assert n == len(records.tasks) and size > 0
    foreign = cache / "notes.txt"
    foreign.write_text("not the cache's")

    shown = run_tcl_json("cache", "--dir", str(cache))
    assert (shown["dir"], shown["files"], shown["bytes"]) == (str(cache), n, size)
    proc = run_tcl("cache", env=tcl_env(TCL_CACHE_DIR=str(root)))  # the default location follows TCL_CACHE_DIR
    assert proc.returncode == 0 and str(cache) in proc.stdout and f"{n} files" in proc.stdout

    proc = run_tcl("cache", "--dir", str(cache), "clear")
    assert proc.returncode == 0, proc.stderr
    assert f"deleted {n} files" in proc.stdout
    assert cache_usage(cache) == (0, 0) and foreign.read_text() == "not the cache's"


def test_a_bad_cap_is_one_line(tmp_path):
    proc = run_tcl("cache", "--dir", str(tmp_path), env=tcl_env(TCL_CACHE_MAX_MB="lots"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "tcl: error: TCL_CACHE_MAX_MB='lots': expected a number of megabytes (0: no cap)"
    ]
