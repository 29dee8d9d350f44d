"""Our records are TVM's JSONDatabase files: we write what TVM reads, we read what TVM writes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import matmul_module, run_tcl

from tcl.api.errors import TclError
from tcl.api.programs import MeasureResult, workload_ir_json
from tcl.measurement.candidates import ensure_tensor_intrinsics, generate_pool
from tcl.records.database import (
    ERRORS_FILE,
    FAILED_RUN_SECS,
    LOCK_FILE,
    RECORD_FILE,
    WORKLOAD_FILE,
    find_databases,
    load_records,
)
from tcl.records.manifest import MANIFEST_FILE, read_manifest, update_manifest
from tcl.records.pools import make_task
from tcl.records.program_keys import program_key
from tcl.records.record_writer import RecordWriter
from tcl.records.stored_files import repair_tail
from tcl.records.tvm_json import tvm_json_dumps, workload_name

TARGET = {"kind": "llvm", "mcpu": "core-avx2", "num-cores": 2}


@pytest.fixture(scope="module")
def tvm_target():
    import tvm

    target = tvm.target.Target(TARGET)
    ensure_tensor_intrinsics(target)
    return target


@pytest.fixture(scope="module")
def task_and_pool(tvm_target):
    mod = matmul_module(32, "mm32")
    return mod, make_task(mod, weight=2.0, networks=("net",)), generate_pool(mod, tvm_target, 8, seed=0)


def results(n: int, fail: set[int] = frozenset()) -> list[MeasureResult]:
    out = []
    for i in range(n):
        if i in fail:
            out.append(MeasureResult(run_secs=None, error_kind="build", error_msg=f"LocalBuilder: boom {i}\nline 2"))
        else:
            out.append(MeasureResult(run_secs=(1e-4 * (i + 1), 1.1e-4 * (i + 1))))
    return out


def write(work_dir: Path, task, pool, target, fail=frozenset(), **kw) -> list[int]:
    with RecordWriter(work_dir, **kw) as w:
        return w.add(task, list(zip(pool, results(len(pool), fail))), target=target)


# ---- TVM's format, both ways --------------------------------------------------------------


def test_lines_are_byte_identical_to_tvms(tmp_path, task_and_pool, tvm_target):
    import tvm.s_tir.meta_schedule as ms

    mod, task, pool = task_and_pool
    write(tmp_path / "ours", task, pool[:3], tvm_target, fail={1})
    (tmp_path / "tvm").mkdir()  # TVM does not create the directory
    db = ms.database.JSONDatabase(work_dir=str(tmp_path / "tvm"))
    wl = db.commit_workload(mod)
    args = ms.arg_info.ArgInfo.from_entry_func(mod, remove_preproc=True)
    for sch, res in zip(pool[:3], results(3, {1})):
        secs = list(res.run_secs) if res.ok else [tvm_float32(FAILED_RUN_SECS)]
        db.commit_tuning_record(ms.database.TuningRecord(sch.trace, wl, secs, tvm_target, args))
    for name in (WORKLOAD_FILE, RECORD_FILE):
        assert (tmp_path / "ours" / name).read_bytes() == (tmp_path / "tvm" / name).read_bytes(), name
    assert "10000000000" in (tmp_path / "ours" / RECORD_FILE).read_text().splitlines()[1]


def tvm_float32(x: float):
    import tvm

    return tvm.tirx.FloatImm("float32", x)  # what AddToDatabase stores for a failed run


def test_tvm_reads_what_we_write(tmp_path, task_and_pool, tvm_target):
    import tvm.s_tir.meta_schedule as ms

    mod, task, pool = task_and_pool
    write(tmp_path, task, pool, tvm_target, fail={0, 5})
    db = ms.database.JSONDatabase(work_dir=str(tmp_path))
    recs = db.get_all_tuning_records()
    assert len(recs) == len(pool) == len(db)
    by_key = {program_key(r.trace): r for r in recs}
    assert set(by_key) == {program_key(s) for s in pool}
    for i, sch in enumerate(pool):
        secs = [float(x) for x in by_key[program_key(sch)].run_secs]
        assert secs == ([FAILED_RUN_SECS] if i in (0, 5) else [1e-4 * (i + 1), 1.1e-4 * (i + 1)])
    assert str(recs[0].target.kind.name) == "llvm" and str(recs[0].target.attrs["mcpu"]) == "core-avx2"
    # MetaSchedule skips failed runs when it picks the best; the best is ours, candidate 1
    best = db.get_top_k(db.commit_workload(mod), 10)
    assert len(best) == len(pool) - 2
    assert program_key(best[0].trace) == program_key(pool[1])
    assert db.query_schedule(mod, tvm_target, "main") is not None


def test_tune_tir_output_loads(tmp_path, tvm_target):
    import tvm.s_tir.meta_schedule as ms

    from tcl.api.measure import fast_build

    mod = matmul_module(16, "mm16")
    work = tmp_path / "runs" / "tune"
    ms.tune_tir(
        mod,
        tvm_target,
        str(work),
        max_trials_global=4,
        num_trials_per_iter=4,
        builder=ms.builder.LocalBuilder(f_build=fast_build, max_workers=1),
        runner=ms.runner.LocalRunner(evaluator_config=ms.runner.EvaluatorConfig(number=1, repeat=1, min_repeat_ms=0)),
        cost_model="random",
        strategy="replay-trace",
        num_tuning_cores=1,
        seed=0,
    )
    assert find_databases(tmp_path) == [work]
    ps = load_records(tmp_path)  # recursive
    ((task, progs),) = list(ps)
    assert task.key == make_task(mod).key and task.name == "mm16" and task.weight == 1.0
    assert len(progs) == 4 and all(p.source == "metaschedule" for p in progs)
    tvm_recs = ms.database.JSONDatabase(work_dir=str(work)).get_all_tuning_records()
    assert {program_key(p.trace) for p in progs} == {program_key(r.trace) for r in tvm_recs}
    ok = [p for p in progs if p.ok]
    assert ok and all(0 < p.latency < 1 for p in ok)
    # and we can append to a directory TVM wrote: its workload is reused, not written again
    extra = generate_pool(mod, tvm_target, 6, seed=7)
    new = [s for s in extra if program_key(s) not in {program_key(p.trace) for p in progs}][:2]
    write(work, make_task(mod), new, tvm_target)
    assert len((work / WORKLOAD_FILE).read_text().splitlines()) == 1
    assert len(load_records(work)) == 4 + len(new)
    assert len(ms.database.JSONDatabase(work_dir=str(work)).get_all_tuning_records()) == 4 + len(new)


# ---- what the loader gives -----------------------------------------------------------------


def test_loader_programs_errors_labels(tmp_path, task_and_pool, tvm_target):
    _, task, pool = task_and_pool
    write(tmp_path, task, pool, tvm_target, fail={2}, profile="x86-avx2")
    ps = load_records(tmp_path)
    assert ps.profile == "x86-avx2"
    t = ps.tasks[task.key]
    assert (t.name, t.weight, t.networks, t.mod_b64) == ("mm32", 2.0, ("net",), task.mod_b64)
    progs = ps.programs[task.key]
    assert [program_key(p.trace) for p in progs] == [program_key(s) for s in pool]
    assert progs[2].error == "build: LocalBuilder: boom 2\nline 2" and progs[2].run_secs is None
    assert progs[0].run_secs == (1e-4, 1.1e-4)
    lat = np.array([np.min([1e-4 * (i + 1), 1.1e-4 * (i + 1)]) for i in range(len(pool))])  # fastest repeat
    expect = lat.min() / lat
    expect[2] = 0.0
    np.testing.assert_allclose(ps.labels(task.key), expect, rtol=1e-12)
    # TVM's files hold no error text: it is in our side file only
    assert "boom" not in (tmp_path / RECORD_FILE).read_text()
    side = [json.loads(x) for x in (tmp_path / ERRORS_FILE).read_text().splitlines()]
    assert side == [
        {
            "line": 3,
            "workload": task.key,
            "key": program_key(pool[2]),
            "kind": "build",
            "msg": "LocalBuilder: boom 2\nline 2",
        }
    ]


def test_failed_run_without_side_entry_is_unknown(tmp_path, task_and_pool, tvm_target):
    _, task, pool = task_and_pool
    write(tmp_path, task, pool[:3], tvm_target, fail={1})
    (tmp_path / ERRORS_FILE).unlink()  # e.g. records MetaSchedule wrote itself
    progs = load_records(tmp_path).programs[task.key]
    assert progs[1].error == "unknown" and not progs[1].ok and progs[0].ok


def test_workload_name_and_ir(task_and_pool):
    _, task, _ = task_and_pool
    assert workload_ir_json(task.mod_b64).startswith("{")  # TVM prefixes an 8-byte length
    assert workload_name(task.mod_b64, task.key) == "mm32"
    main = make_task(matmul_module(8, "main"))
    assert main.name == f"main_{main.key[:8]}"


def test_a_length_prefix_that_starts_like_json_is_still_stripped():
    import base64
    import struct

    text = '{"pad": "' + "x" * (0x1055B - 11) + '"}'  # 0x1055b bytes: the prefix's first byte is "["
    mod_b64 = base64.b64encode(struct.pack("<Q", len(text)) + text.encode()).decode()
    assert workload_ir_json(mod_b64) == text
    assert workload_ir_json(base64.b64encode(text.encode()).decode()) == text  # no prefix at all


def test_json_dialect():
    assert (
        tvm_json_dumps({"b": [True, 1.0, 1e-05, 1e10, None], "a": 'x"\\y'})
        == '{"a":"x\\"\\\\y","b":[1,1,1.0000000000000000818e-05,10000000000,null]}'
    )
    with pytest.raises(ValueError):
        tvm_json_dumps([float("inf")])


# ---- crash safety --------------------------------------------------------------------------


def test_torn_last_line_is_repaired(tmp_path, task_and_pool, tvm_target):
    import tvm.s_tir.meta_schedule as ms

    _, task, pool = task_and_pool
    write(tmp_path, task, pool[:3], tvm_target)
    rec = tmp_path / RECORD_FILE
    whole = rec.read_bytes()
    fourth = tvm_json_dumps([0, [json.loads(whole.splitlines()[0])[1][0], [1e-3], None, None]]).encode()
    rec.write_bytes(whole + fourth[: len(fourth) // 2])  # killed mid-write
    assert len(load_records(tmp_path)) == 3  # read-only loader skips the torn tail
    with RecordWriter(tmp_path) as w:  # the next writer cuts it off
        assert rec.read_bytes() == whole
        w.add(task, [(pool[3], MeasureResult(run_secs=(5e-5,)))], target=tvm_target)
    progs = load_records(tmp_path).programs[task.key]
    assert [program_key(p.trace) for p in progs] == [program_key(s) for s in pool[:4]]
    assert len(ms.database.JSONDatabase(work_dir=str(tmp_path)).get_all_tuning_records()) == 4


def test_complete_last_line_missing_newline_is_kept(tmp_path, task_and_pool, tvm_target):
    _, task, pool = task_and_pool
    write(tmp_path, task, pool[:3], tvm_target)
    rec = tmp_path / RECORD_FILE
    whole = rec.read_bytes()
    rec.write_bytes(whole[:-1])
    assert len(load_records(tmp_path)) == 3
    assert repair_tail(rec) == 0 and rec.read_bytes() == whole


def test_error_lines_of_lost_records_are_dropped(tmp_path, task_and_pool, tvm_target):
    _, task, pool = task_and_pool
    write(tmp_path, task, pool[:2], tvm_target, fail={1})
    errors = tmp_path / ERRORS_FILE
    # a crash after the error lines were written but before their records were
    errors.write_text(
        errors.read_text()
        + json.dumps({"line": 3, "workload": task.key, "key": "x", "kind": "run", "msg": "lost"})
        + "\n"
    )
    with RecordWriter(tmp_path) as w:
        w.add(task, [(pool[2], MeasureResult(run_secs=(1e-3,)))], target=tvm_target)
    assert [e["line"] for e in map(json.loads, errors.read_text().splitlines())] == [2]
    assert load_records(tmp_path).programs[task.key][2].ok


def test_corrupt_middle_line_names_file_and_line(tmp_path, task_and_pool, tvm_target):
    _, task, pool = task_and_pool
    write(tmp_path, task, pool[:4], tvm_target)
    rec = tmp_path / RECORD_FILE
    lines = rec.read_text().splitlines(keepends=True)
    lines[1] = lines[1][:40] + "\n"
    rec.write_text("".join(lines))
    with pytest.raises(TclError, match=rf"{rec}:2: corrupt line"):
        load_records(tmp_path)
    with pytest.raises(TclError, match=rf"{rec}:2"):
        with RecordWriter(tmp_path) as w:
            w.measured_keys()
    lines[1] = "[0,[1,2]]\n"  # valid JSON, not a record
    rec.write_text("".join(lines))
    with pytest.raises(TclError, match=rf"{rec}:2: not a tuning record"):
        load_records(tmp_path)


# ---- manifest, profiles, locking, resume ---------------------------------------------------


def test_manifest(tmp_path, task_and_pool, tvm_target):
    _, task, pool = task_and_pool
    write(tmp_path, task, pool[:2], tvm_target, profile="x86-avx2", networks={"net": {"batch": 1}})
    m = read_manifest(tmp_path)
    assert m["format"] == "tcl-manifest" and m["profile"] == "x86-avx2" and m["tvm_version"].startswith("0.")
    assert m["cpu_model"] and m["created"] and m["networks"] == {"net": {"batch": 1}}
    assert m["tasks"] == [{"key": task.key, "name": "mm32", "weight": 2.0, "networks": ["net"]}]
    assert not list(tmp_path.glob(".*tmp"))  # atomic writes leave no temporaries
    renamed = type(task)(key=task.key, name="dense_a", weight=3.0, networks=("net",), mod_b64=task.mod_b64)
    update_manifest(tmp_path, tasks=[renamed], replace_tasks=True)
    t = load_records(tmp_path).tasks[task.key]
    assert (t.name, t.weight) == ("dense_a", 3.0)
    with pytest.raises(TclError, match="refusing to add records of profile 'x86-generic'"):
        RecordWriter(tmp_path, profile="x86-generic")
    (tmp_path / MANIFEST_FILE).write_text("{not json")
    with pytest.raises(TclError, match=rf"{tmp_path / MANIFEST_FILE}"):
        load_records(tmp_path)


def test_several_profiles(tmp_path, task_and_pool, tvm_target):
    _, task, pool = task_and_pool
    write(tmp_path / "a", task, pool[:2], tvm_target, profile="p1")
    write(tmp_path / "b", task, pool[2:5], tvm_target, profile="p2")
    with pytest.raises(TclError, match="several profiles"):
        load_records(tmp_path)
    assert len(load_records(tmp_path, profile="p2")) == 3
    assert load_records(tmp_path, profile="p1").profile == "p1"


def test_one_writer_per_directory_and_resume(tmp_path, task_and_pool, tvm_target):
    _, task, pool = task_and_pool
    with RecordWriter(tmp_path) as w:
        with pytest.raises(TclError, match="another process"):
            RecordWriter(tmp_path)
        w.add(task, [(pool[0], MeasureResult(run_secs=(1e-3,)))], target=tvm_target)
    with RecordWriter(tmp_path) as w:
        assert w.measured_keys() == {task.key: {program_key(pool[0])}}
        todo = [s for s in pool[:3] if program_key(s) not in w.measured_keys()[task.key]]
        assert w.add(task, [(s, MeasureResult(run_secs=(1e-3,))) for s in todo], target=tvm_target) == [2, 3]
    assert not (tmp_path / LOCK_FILE).exists()  # the writer leaves no lock file behind


def test_a_writer_that_locked_a_removed_lock_file_locks_afresh(tmp_path):
    """The moment between one writer's removing its lock file and another's locking what it had
    opened: the second must not count an unlinked file as the directory's lock."""
    import fcntl

    from tcl.records.record_writer import _lock_directory

    path = tmp_path / LOCK_FILE
    first = _lock_directory(path)
    stale = open(path, "a")  # opened before the first writer leaves
    path.unlink()
    fcntl.flock(first.fileno(), fcntl.LOCK_UN)
    first.close()
    fcntl.flock(stale.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # the old inode: lockable, but not the lock
    second = _lock_directory(path)
    assert path.exists() and os.fstat(second.fileno()).st_ino == os.stat(path).st_ino
    with pytest.raises(TclError, match="another process is writing records here"):
        _lock_directory(path)
    second.close()
    stale.close()


def test_loading_is_fast(tmp_path, task_and_pool, tvm_target):
    _, task, pool = task_and_pool
    write(tmp_path, task, pool, tvm_target)
    rec = tmp_path / RECORD_FILE
    lines = rec.read_text().splitlines(keepends=True)
    rec.write_text("".join(lines * 625))  # 5000 records of ~2 KB (TVM's own JSONDatabase: ~3x slower)
    start = time.perf_counter()
    ps = load_records(tmp_path)
    took = time.perf_counter() - start
    assert len(ps) == 5000
    assert took < 10, f"loading 5000 records took {took:.1f} s"


def test_packed_copy_loads_the_same_and_unpacks_byte_identical(tmp_path, task_and_pool, tvm_target):
    _, task, pool = task_and_pool
    src = tmp_path / "db"
    write(src, task, pool, tvm_target, fail={1}, profile="p")
    proc = run_tcl("dataset", "pack", str(src), "--out", str(tmp_path / "packed"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "packed" / (RECORD_FILE + ".gz")).exists()
    assert not (tmp_path / "packed" / RECORD_FILE).exists()
    plain, packed = load_records(src), load_records(tmp_path / "packed")
    assert [(p.trace, p.run_secs, p.error) for p in packed.programs[task.key]] == [
        (p.trace, p.run_secs, p.error) for p in plain.programs[task.key]
    ]
    assert packed.tasks[task.key].weight == 2.0
    with pytest.raises(TclError, match="packed .* unpack it first"):
        RecordWriter(tmp_path / "packed")
    proc = run_tcl("dataset", "unpack", str(tmp_path / "packed"), "--out", str(tmp_path / "again"))
    assert proc.returncode == 0, proc.stderr
    for name in (RECORD_FILE, WORKLOAD_FILE, ERRORS_FILE):
        assert (tmp_path / "again" / name).read_bytes() == (src / name).read_bytes()
    proc = run_tcl("dataset", "pack", str(src), "--out", str(tmp_path / "again"))
    assert proc.returncode == 2 and "not empty" in proc.stderr and "Traceback" not in proc.stderr


def test_failed_pack_leaves_no_output(tmp_path, task_and_pool, tvm_target):
    _, task, pool = task_and_pool
    src = tmp_path / "db"
    write(src, task, pool, tvm_target, profile="p")
    run_tcl("dataset", "pack", str(src), "--out", str(tmp_path / "packed"))
    broken = tmp_path / "packed" / (RECORD_FILE + ".gz")
    broken.write_bytes(broken.read_bytes()[:40])  # a gzip stream cut short: the copy fails half-way
    proc = run_tcl("dataset", "unpack", str(tmp_path / "packed"), "--out", str(tmp_path / "plain"))
    assert proc.returncode == 2 and f"{broken}: not a readable gzip file" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "plain").exists() and not (tmp_path / "plain.partial").exists()
