"""Candidate pools: distinct, deterministic, postprocessed; saved and loaded; keys stable through TVM."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tcl.api.errors import TclError
from tcl.measurement.candidates import ensure_tensor_intrinsics, generate_pool, generate_pool_with_stats
from tcl.records.database import load_records
from tcl.records.pools import (
    POOL_CANDIDATES,
    POOL_META,
    POOL_WORKLOADS,
    Pool,
    extend_pool,
    load_pool,
    make_task,
    save_pool,
)
from tcl.records.program_keys import canonical_json, program_key
from tcl.records.trace_json import trace_to_json

TARGET = {"kind": "llvm", "mcpu": "core-avx2", "num-cores": 2}
ROOT = Path(__file__).parent.parent


def matmul(n: int):
    import tvm
    from tvm import te

    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return tvm.IRModule({"main": te.create_prim_func([a, b, c]).with_attr("global_symbol", f"mm{n}")})


def conv2d_relu():
    import tvm
    from tvm import te, topi

    x = te.placeholder((1, 16, 14, 14), name="X")
    w = te.placeholder((32, 16, 3, 3), name="W")
    y = topi.nn.relu(topi.nn.conv2d_nchw(x, w, 1, 1, 1))
    return tvm.IRModule({"main": te.create_prim_func([x, w, y]).with_attr("global_symbol", "conv2d_relu")})


def vector_add(n: int):
    import tvm
    from tvm import te

    a = te.placeholder((n,), name="A")
    b = te.placeholder((n,), name="B")
    c = te.compute((n,), lambda i: a[i] + b[i], name="C")
    return tvm.IRModule({"main": te.create_prim_func([a, b, c]).with_attr("global_symbol", "add")})


@pytest.fixture(scope="module")
def target():
    import tvm

    t = tvm.target.Target(TARGET)
    ensure_tensor_intrinsics(t)
    return t


def keys(schedules):
    return [program_key(s) for s in schedules]


def test_distinct_deterministic_postprocessed(target):
    mod = matmul(32)
    a = generate_pool(mod, target, 20, seed=0)
    b = generate_pool(mod, target, 20, seed=0)
    c = generate_pool(mod, target, 20, seed=1)
    assert len(a) == 20 and len(set(keys(a))) == 20
    assert keys(a) == keys(b)
    assert keys(a) != keys(c)
    for sch in a:  # postprocessors ran: the trace has its postprocessing part, the IR is final
        kinds = [inst[0] for inst in trace_to_json(sch)[0]]
        assert "EnterPostproc" in kinds
        assert "meta_schedule.parallel" not in sch.mod.script()  # RewriteParallelVectorizeUnroll applied


def test_conv2d_pool(target):
    pool, stats = generate_pool_with_stats(conv2d_relu(), target, 12, seed=3)
    assert len(set(keys(pool))) == 12 and stats.found_random == 12 and not stats.exhausted


def test_mutation_takes_over(target):
    mod = matmul(32)
    pool, stats = generate_pool_with_stats(mod, target, 16, seed=0, max_random=4)
    again, _ = generate_pool_with_stats(mod, target, 16, seed=0, max_random=4)
    assert stats.found_random == 4 and stats.found_mutation == 12
    assert len(set(keys(pool))) == 16 and keys(pool) == keys(again)
    assert keys(pool)[:4] == keys(generate_pool(mod, target, 4, seed=0))


def test_every_candidate_is_labelled_with_its_origin(tmp_path, target):
    mod = matmul(32)
    pool, stats = generate_pool_with_stats(mod, target, 16, seed=0, max_random=4)
    assert stats.origins == ["random"] * 4 + ["mutation"] * 12
    task = make_task(mod)
    saved = Pool()
    saved.add(task, pool, stats.origins)
    save_pool(tmp_path / "pool", saved)
    assert load_pool(tmp_path / "pool").origins[task.key] == stats.origins
    # a version-1 pool (no origins) still loads, its origins unknown
    meta = json.loads((tmp_path / "pool" / POOL_META).read_text())
    (tmp_path / "pool" / POOL_META).write_text(json.dumps({**meta, "version": 1}))
    cand = tmp_path / "pool" / POOL_CANDIDATES
    cand.write_text("".join(json.dumps(json.loads(line)[:2]) + "\n" for line in cand.read_text().splitlines()))
    old = load_pool(tmp_path / "pool")
    assert old.origins[task.key] == [None] * 16 and old.keys(task.key) == keys(pool)
    cand.write_text(cand.read_text().replace("]\n", ', "guessed"]\n', 1))
    with pytest.raises(TclError, match=rf"{cand}:1: expected .* origin one of random, mutation, evolutionary"):
        load_pool(tmp_path / "pool")


def test_a_growing_pool_is_appended_to_and_an_interrupted_append_is_never_read(tmp_path, target):
    tasks = [(make_task(matmul(n)), generate_pool(matmul(n), target, 4, seed=0)) for n in (16, 24, 32)]
    pool = Pool(meta={"seed": 0})
    pool.add(*tasks[0])
    root = save_pool(tmp_path / "pool", pool)
    first = (root / POOL_CANDIDATES).read_bytes()
    pool.add(*tasks[1])
    extend_pool(root, pool)
    assert (root / POOL_CANDIDATES).read_bytes().startswith(first)  # appended, not rewritten

    # a writer killed mid-append: lines of a third task, the last one torn, and no metadata for them
    with open(root / POOL_WORKLOADS, "a") as fh:
        fh.write('["deadbeef", "AAAA"]\n["cut')
    with open(root / POOL_CANDIDATES, "a") as fh:
        fh.write('[2, [[], []]]\n[2, [[["Get')
    loaded = load_pool(root)
    assert list(loaded.tasks) == list(pool.tasks) and all(loaded.keys(k) == pool.keys(k) for k in pool.tasks)

    pool.add(*tasks[2])
    extend_pool(root, pool)  # cuts the torn append off before appending
    loaded = load_pool(root)
    assert list(loaded.tasks) == list(pool.tasks) and all(loaded.keys(k) == pool.keys(k) for k in pool.tasks)
    whole = save_pool(tmp_path / "whole", pool)
    for name in (POOL_WORKLOADS, POOL_CANDIDATES):
        assert (root / name).read_bytes() == (whole / name).read_bytes()

    # a directory holding other tasks first is rewritten, not appended to
    other = Pool()
    other.add(*tasks[2])
    extend_pool(root, other)
    assert list(load_pool(root).tasks) == list(other.tasks)


def test_evolutionary_search_gathers_where_the_model_predicts_fast_programs(target):
    """Guided by the shipped x86-avx2 Mamba checkpoint, the evolutionary candidates score
    higher under that model than the random ones, and the pool is still deterministic."""
    import numpy as np

    from tcl.learning.evaluation import load_checkpoint
    from tcl.measurement.candidates import schedule_scorer

    model = load_checkpoint(ROOT / "plugins" / "pretrained" / "x86-avx2" / "mamba")
    mod = matmul(64)
    pool, stats = generate_pool_with_stats(mod, target, 48, seed=0, max_random=16, model=model, population=8)
    assert stats.origins == ["random"] * 16 + ["evolutionary"] * 32 and stats.found_evolutionary == 32
    assert len(set(keys(pool))) == 48
    again, _ = generate_pool_with_stats(mod, target, 48, seed=0, max_random=16, model=model, population=8)
    assert keys(again) == keys(pool)
    scores = np.array(schedule_scorer(model, mod)(pool))
    assert np.median(scores[16:]) > np.quantile(scores[:16], 0.75)


def test_same_pool_in_another_process(target):
    code = (
        "import json, tvm\n"
        "from tests.test_pools import matmul, TARGET\n"
        "from tcl.measurement.candidates import generate_pool\nfrom tcl.records.program_keys import program_key\n"
        "print(json.dumps([program_key(s) for s in generate_pool(matmul(32), TARGET, 12, seed=5, max_random=4)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == keys(
        generate_pool(matmul(32), target, 12, seed=5, max_random=4)
    )


def test_small_space_is_exhausted(target):
    pool, stats = generate_pool_with_stats(vector_add(64), target, 200, seed=0, patience=40)
    assert 0 < len(pool) < 200 and stats.exhausted
    assert len(set(keys(pool))) == len(pool)


def test_program_key_is_canonical():
    trace = [
        [["SamplePerfectTile", ["l2"], [4, 64], ["v5"]], ["Split", ["l2", "v5"], [True, False], ["l9"]]],
        [[0, [1, 2, 2, 16]]],
    ]
    as_tvm_writes = json.loads(json.dumps(trace).replace("true", "1").replace("false", "0"))
    assert program_key(trace) == program_key(as_tvm_writes)
    assert program_key({"a": 1.0, "b": [0.25]}) == program_key({"b": [0.25], "a": 1})
    assert program_key(trace) != program_key([trace[0], [[0, [1, 2, 16, 2]]]])
    assert canonical_json({"b": 1, "a": [1.5]}) == '{"a":[1.5],"b":1}'


def test_save_load_round_trip(tmp_path, target):
    mm, conv = matmul(16), conv2d_relu()
    t_mm, t_conv = make_task(mm, weight=3, networks=("net",)), make_task(conv)
    p_mm, p_conv = generate_pool(mm, target, 10, seed=0), generate_pool(conv, target, 6, seed=0)
    save_pool(tmp_path / "pool", [(t_mm, p_mm), (t_conv, p_conv)], meta={"target": target, "seed": 0})
    pool = load_pool(tmp_path / "pool")
    assert list(pool.tasks) == [t_mm.key, t_conv.key]
    assert pool.tasks[t_mm.key] == t_mm and pool.tasks[t_conv.key].name == "conv2d_relu"
    assert pool.keys(t_mm.key) == keys(p_mm) and pool.keys(t_conv.key) == keys(p_conv)
    in_memory = Pool()
    in_memory.add(t_mm, p_mm)
    in_memory.add(t_conv, p_conv)  # holds what loading gives, to the byte: collect need not reload
    assert json.dumps(in_memory.traces) == json.dumps(pool.traces)
    assert pool.meta["target"]["mcpu"] == "core-avx2" and pool.meta["tvm_version"]
    # replaying a stored trace gives the same program
    again = pool.schedule(t_conv.key, 2)
    assert program_key(again) == keys(p_conv)[2]
    assert again.mod.script() == p_conv[2].mod.script()
    ps = pool.program_set()
    assert len(ps) == 16 and not any(p.ok for _, progs in ps for p in progs)
    # a pool is not a record database
    assert len(load_records(tmp_path / "pool")) == 0


def test_keys_survive_tvm_records(tmp_path, target):
    """A trace that went through TVM's own JSONDatabase keeps the key of its pool entry."""
    import tvm.s_tir.meta_schedule as ms

    mod = matmul(16)
    task = make_task(mod)
    save_pool(tmp_path / "pool", [(task, generate_pool(mod, target, 6, seed=0))])
    pool = load_pool(tmp_path / "pool")
    index = pool.index(task.key)
    work = tmp_path / "records"
    work.mkdir()
    db = ms.database.JSONDatabase(work_dir=str(work))
    wl = db.commit_workload(mod)
    args = ms.arg_info.ArgInfo.from_entry_func(mod, remove_preproc=True)
    for i in (4, 1, 3):  # measured out of order, from schedules replayed off the pool file
        db.commit_tuning_record(
            ms.database.TuningRecord(pool.schedule(task.key, i).trace, wl, [1e-3 * i], target, args)
        )
    raw = [json.loads(line)[1][0] for line in (work / "database_tuning_record.json").read_text().splitlines()]
    assert [index[program_key(t)] for t in raw] == [4, 1, 3]
    reloaded = ms.database.JSONDatabase(work_dir=str(work)).get_all_tuning_records()
    assert sorted(index[program_key(r.trace)] for r in reloaded) == [1, 3, 4]
    ours = load_records(work).programs[task.key]
    assert [index[program_key(p.trace)] for p in ours] == [4, 1, 3]


def test_broken_pools_are_refused(tmp_path, target):
    mod = matmul(16)
    pool = Pool()
    pool.add(make_task(mod), generate_pool(mod, target, 3, seed=0))
    save_pool(tmp_path / "p", pool)
    cand = tmp_path / "p" / POOL_CANDIDATES
    lines = cand.read_text().splitlines()
    cand.write_text("\n".join([lines[0], lines[1][:30], lines[2]]) + "\n")
    with pytest.raises(TclError, match=rf"{cand}:2: corrupt line"):
        load_pool(tmp_path / "p")
    cand.write_text("\n".join([lines[0], json.dumps([0, "abc"]), lines[2]]) + "\n")
    with pytest.raises(TclError, match=rf"{cand}:2: not a candidate: the trace is not \[instructions, decisions\]"):
        load_pool(tmp_path / "p")
    cand.write_text("\n".join(lines[:2]) + "\n")
    with pytest.raises(TclError, match="has 2 candidates"):
        load_pool(tmp_path / "p")
    (tmp_path / "p" / POOL_META).unlink()
    with pytest.raises(TclError, match="not a candidate pool"):
        load_pool(tmp_path / "p")
