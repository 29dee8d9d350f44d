"""Featurizers on real programs: a 64^3 matmul pool from MetaSchedule's design space, TVM
records read back from disk, and TenSet steps; plus the feature cache."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from conftest import matmul_module

from tcl.api.errors import TclError
from tcl.api.programs import Program, ProgramSet
from tcl.records.database import load_records
from tcl.records.feature_cache import cached_features, default_cache_dir, program_keys
from tcl.records.tenset import import_tenset
from tcl_plugins.featurizers.per_store import PerStoreFeaturizer
from tcl_plugins.featurizers.register import tcl_register_featurizers
from tcl_plugins.featurizers.trace_seq import TraceSeqFeaturizer
from tcl_plugins.featurizers.trace_seq_layout import (
    ANN_SLOT,
    COL_POST,
    COL_TENSET,
    DROPPED,
    KIND_SLOT,
    KINDS,
    N_KINDS,
    VAL0,
    WIDTH,
)

TARGET = {"kind": "llvm", "mcpu": "core-avx2", "num-cores": 2}
TENSET_SAMPLE = Path(__file__).parent / "data" / "tenset_sample.json"
N_POOL = 24


@pytest.fixture(scope="module")
def mm():
    """(task, programs as read from disk, the live schedules) of a 64^3 matmul."""
    from tcl.measurement.candidates import generate_pool
    from tcl.records.pools import make_task
    from tcl.records.trace_json import trace_to_json

    mod = matmul_module(64, "mm64")
    schedules = generate_pool(mod, TARGET, N_POOL, seed=0)
    task = make_task(mod, name="mm64")
    progs = [Program(task_key=task.key, trace=trace_to_json(s)) for s in schedules]
    return task, progs, schedules


@pytest.fixture(scope="module")
def tenset(tmp_path_factory):
    out = tmp_path_factory.mktemp("tenset") / "imp"
    import_tenset(TENSET_SAMPLE, out, profile="tenset-avx2")
    return load_records(out)


def used_rows(x: np.ndarray) -> np.ndarray:
    return x[:, :, :N_KINDS].sum(axis=2) > 0


# ---- trace-seq -------------------------------------------------------------------------


def test_trace_seq_contract(mm):
    task, progs, _ = mm
    f = TraceSeqFeaturizer()
    x = f.featurize(task, progs)
    assert isinstance(x, np.ndarray) and x.dtype == np.float32
    assert x.shape == (len(progs), 48, WIDTH) and WIDTH == 81
    assert np.isfinite(x).all()
    used = used_rows(x)
    # exactly one kind per used row, padding rows all zero, every program has rows
    assert np.array_equal(x[:, :, :N_KINDS][used].sum(axis=1), np.ones(used.sum(), dtype=np.float32))
    assert not x[~used].any()
    assert used.sum(axis=1).min() >= 10
    # deterministic, also in a fresh instance, and programs featurized alone give the same rows
    assert np.array_equal(x, f.featurize(task, progs))
    assert np.array_equal(x, TraceSeqFeaturizer().featurize(task, progs))
    assert np.array_equal(x, np.concatenate([f.featurize(task, [p]) for p in progs]))
    # distinct programs give distinct features (names are abstracted, so not always)
    assert len({a.tobytes() for a in x}) >= 0.9 * len(progs)
    # postprocessing rows are flagged, after the first rows
    post = x[:, :, COL_POST] > 0
    assert post.any(axis=1).all() and not post[:, 0].any()


def test_trace_seq_merges_decisions(mm):
    task, progs, _ = mm
    x = TraceSeqFeaturizer(length=80).featurize(task, progs)
    insts, decisions = progs[0].trace
    dec = dict(decisions)
    rows = [i for i, inst in enumerate(insts) if inst[0] not in DROPPED]
    tile = next(i for i in rows if insts[i][0] == "SamplePerfectTile")
    r = rows.index(tile)
    row = x[0, r]
    assert row[KIND_SLOT["SamplePerfectTile"]] == 1
    n, max_inner = insts[tile][2]
    expect = np.log1p(np.array([n, max_inner, *dec[tile]], dtype=np.float32))
    assert np.allclose(row[VAL0 : VAL0 + len(expect)], expect)
    # the Split using the sampled factors carries them too
    split = next(i for i in rows if i > tile and insts[i][0] == "Split" and insts[tile][3][0] in insts[i][1])
    srow = x[0, rows.index(split)]
    assert np.allclose(srow[VAL0 : VAL0 + len(dec[tile])], np.log1p(np.array(dec[tile], dtype=np.float32)))
    # the unroll Annotate carries the chosen value of its SampleCategorical
    cat = next(i for i in rows if insts[i][0] == "SampleCategorical")
    chosen = insts[cat][2][0][dec[cat]]
    ann = next(i for i in rows if insts[i][0] == "Annotate" and insts[cat][3][0] in insts[i][1])
    arow = x[0, rows.index(ann)]
    assert arow[ANN_SLOT["meta_schedule.unroll_explicit"]] == 1
    assert math.isclose(arow[VAL0], math.log1p(chosen), rel_tol=1e-6)


def test_trace_seq_options(mm):
    task, progs, schedules = mm
    short = TraceSeqFeaturizer(length=8).featurize(task, progs)
    assert short.shape == (len(progs), 8, WIDTH)
    assert np.array_equal(short, TraceSeqFeaturizer().featurize(task, progs)[:, :8])
    kept = TraceSeqFeaturizer(length=80, drop_lookups=False).featurize(task, progs)
    assert kept[:, :, KIND_SLOT["GetLoops"]].any() and used_rows(kept).sum() > used_rows(short).sum()
    assert TraceSeqFeaturizer(length=8).cache_token != TraceSeqFeaturizer().cache_token
    # a live Trace in place of the JSON gives the same features
    live = [Program(task_key=task.key, trace=s.trace, schedule=s) for s in schedules[:4]]
    f = TraceSeqFeaturizer()
    assert np.array_equal(f.featurize(task, live), f.featurize(task, progs[:4]))
    assert f.featurize(task, []).shape == (0, 48, WIDTH)
    with pytest.raises(TclError):
        TraceSeqFeaturizer(length=0)


def test_trace_seq_unknown_kinds_and_records_from_disk(mm, tmp_path):
    task, progs, schedules = mm
    import tvm

    from tcl.api.programs import MeasureResult
    from tcl.records.record_writer import RecordWriter

    with RecordWriter(tmp_path / "db", profile="x86-avx2") as w:
        w.add(
            task,
            [(s, MeasureResult(run_secs=(1e-4 * (i + 1),))) for i, s in enumerate(schedules[:6])],
            target=tvm.target.Target(TARGET),
        )
    ps = load_records(tmp_path / "db")
    disk = ps.programs[task.key]
    f = TraceSeqFeaturizer()
    assert np.array_equal(f.featurize(task, disk), f.featurize(task, progs[:6]))
    insts, decisions = progs[0].trace
    odd = Program(task_key=task.key, trace=[[["SomeFutureKind", ["b0"], [7], ["b1"]], *insts], decisions])
    row = f.featurize(task, [odd])[0, 0]
    assert row[KIND_SLOT["other"]] == 1 and math.isclose(row[VAL0], math.log1p(7), rel_tol=1e-6)
    for broken in ([[["Split"]], []], [["not an instruction"], []], "garbage"):
        with pytest.raises(TclError, match="trace-seq: (malformed|a MetaSchedule trace must be)"):
            f.featurize(task, [Program(task_key=task.key, trace=broken)])
    with pytest.raises(TclError, match="malformed"):
        f.featurize(task, [Program(task_key=task.key, trace=[["SP", 2]], source="tenset")])


def test_trace_seq_tenset_steps(tenset):
    f = TraceSeqFeaturizer()
    for task, progs in tenset:
        x = f.featurize(task, progs)
        assert x.shape == (len(progs), 48, WIDTH) and x.dtype == np.float32
        used = used_rows(x)
        assert np.array_equal(used.sum(axis=1), [min(len(p.trace), 48) for p in progs])
        assert (x[:, :, COL_TENSET][used] == 1).all() and not x[:, :, COL_POST].any()
        assert not x[:, :, KIND_SLOT["other"]].any()  # every step kind of the sample is mapped
        distinct_steps = {repr(p.trace) for p in progs}
        assert len({a.tobytes() for a in x}) == len(distinct_steps)
        # an SP step carries its split lengths first
        pos, step = next((i, s) for i, s in enumerate(progs[0].trace) if s[0] == "SP")
        assert x[0, pos, KIND_SLOT["Split"]] == 1
        lengths = np.log1p(np.array(step[4], dtype=np.float32))
        assert np.allclose(x[0, pos, VAL0 : VAL0 + len(lengths)], lengths)


# ---- per-store -------------------------------------------------------------------------


def test_per_store(mm):
    task, progs, schedules = mm
    f = PerStoreFeaturizer(target=TARGET, batch=3)
    feats = f.featurize(task, progs[:6])
    assert isinstance(feats, list) and len(feats) == 6
    for a in feats:
        assert isinstance(a, np.ndarray) and a.dtype == np.float32
        assert a.ndim == 2 and a.shape[1] == 164 and a.shape[0] >= 1
        assert np.isfinite(a).all()
    assert all(np.array_equal(a, b) for a, b in zip(feats, f.featurize(task, progs[:6])))
    live = [Program(task_key=task.key, trace=p.trace, schedule=s) for p, s in zip(progs[:6], schedules[:6])]
    assert all(np.array_equal(a, b) for a, b in zip(feats, f.featurize(task, live)))
    assert len({a.tobytes() for a in feats}) >= 4
    assert f.cache_token == "cpu" and PerStoreFeaturizer(target={"kind": "cuda"}).cache_token == "gpu"
    assert f.featurize(task, []) == []


def test_per_store_refuses_tenset(tenset):
    task, progs = next(iter(tenset))
    with pytest.raises(TclError, match="no TVM workload"):
        PerStoreFeaturizer().featurize(task, progs)


# ---- cache and registration ------------------------------------------------------------


class Counting(TraceSeqFeaturizer):
    calls = 0

    def featurize(self, task, programs):
        Counting.calls += 1
        return super().featurize(task, programs)


def test_cache_hit_and_version_miss(mm, tenset, tmp_path):
    task, progs, _ = mm
    records = ProgramSet()
    records.add(task, progs)
    for t, p in tenset:
        records.add(t, p)
    f = Counting()
    Counting.calls = 0
    first = cached_features(f, records, tmp_path)
    assert Counting.calls == len(records.tasks) and len(list(tmp_path.rglob("*.npz"))) == len(records.tasks)
    assert not list(tmp_path.rglob("*.tmp"))
    second = cached_features(f, records, tmp_path)
    assert Counting.calls == len(records.tasks)  # all hits
    for key in records.tasks:
        assert np.array_equal(first[key], second[key]) and second[key].dtype == np.float32
        assert np.array_equal(second[key], f.featurize(records.tasks[key], records.programs[key]))
    Counting.calls = 0
    f.version = "changed"
    cached_features(f, records, tmp_path)
    assert Counting.calls == len(records.tasks)
    f.version = TraceSeqFeaturizer.version
    Counting.calls = 0
    cached_features(Counting(length=16), records, tmp_path)  # another cache token: a miss
    assert Counting.calls == len(records.tasks)
    # other programs of the task (a subset, reordered) miss; a corrupt file is recomputed
    Counting.calls = 0
    sub = ProgramSet()
    sub.add(task, progs[::-1])
    cached_features(f, sub, tmp_path)
    assert Counting.calls == 1
    for path in tmp_path.rglob("*.npz"):
        path.write_bytes(b"not a zip")
    Counting.calls = 0
    again = cached_features(f, records, tmp_path)
    assert Counting.calls == len(records.tasks) and np.array_equal(again[task.key], first[task.key])


def test_cache_ragged_per_store(mm, tmp_path):
    task, progs, _ = mm
    records = ProgramSet()
    records.add(task, progs[:4])
    f = PerStoreFeaturizer(target=TARGET)
    first = cached_features(f, records, tmp_path)[task.key]
    [path] = list(tmp_path.rglob("*.npz"))
    with np.load(path) as z:
        assert z["offsets"].tolist() == [0, *np.cumsum([a.shape[0] for a in first]).tolist()]
        assert z["data"].shape == (sum(a.shape[0] for a in first), 164)
    second = cached_features(f, records, tmp_path)[task.key]
    assert len(second) == 4 and all(np.array_equal(a, b) and b.dtype == np.float32 for a, b in zip(first, second))


def test_default_cache_dir(monkeypatch, tmp_path, mm):
    monkeypatch.setenv("TCL_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c" / "features"
    monkeypatch.delenv("TCL_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert default_cache_dir() == Path.home() / ".cache" / "tcl" / "features"
    from tcl.records.program_keys import program_key

    _, progs, _ = mm
    assert program_keys(progs[:3]) == [program_key(p.trace) for p in progs[:3]]


def test_vocabulary_is_tvms():
    from tvm.s_tir.schedule import InstructionKind

    tvm_kinds = [k for k in KINDS if k not in ("FollowSplit", "FollowFusedSplit", "ComputeRoot", "other")]
    assert len(tvm_kinds) == len(set(tvm_kinds)) == 52
    for kind in tvm_kinds:
        InstructionKind.get(kind)  # raises for a kind TVM does not register


def test_registration():
    regs = {r.name: r for r in tcl_register_featurizers()}
    assert set(regs) == {"per-store", "trace-seq"}
    for name, reg in regs.items():
        obj = reg.factory()
        assert obj.name == name and obj.version == reg.version
