"""The memoized trace JSON equals TVM's own ``as_json`` on real MetaSchedule candidates."""

from __future__ import annotations

from conftest import matmul_module

from tcl.measurement.candidates import generate_pool
from tcl.records.trace_json import TraceJson, plain_json

TARGET = {"kind": "llvm", "mcpu": "core-avx2", "num-cores": 2}


def softmax_module():
    """A row softmax: its design space samples compute locations (``SampleComputeLocation``)."""
    import tvm
    from tvm import te, topi

    x = te.placeholder((16, 128), name="X")
    return tvm.IRModule({"main": te.create_prim_func([x, topi.nn.softmax(x, axis=1)])})


def test_memoized_json_equals_as_json_across_tasks_and_shares_lines():
    convert = TraceJson()
    seen_lines = 0
    kinds = set()
    for mod in (matmul_module(64), softmax_module()):
        schedules = generate_pool(mod, TARGET, 40, seed=0)
        assert len(schedules) >= 20
        for sch in schedules:
            expected = plain_json(sch.trace.as_json(remove_postproc=False))
            assert convert(sch.trace) == expected
            assert convert(sch.trace) == expected  # again, every line now from the memo
            kinds.update(inst[0] for inst in expected[0])
            seen_lines += len(expected[0])
    # all four decision-carrying or postprocessing kinds these spaces have were exercised
    assert {"SamplePerfectTile", "SampleCategorical", "SampleComputeLocation", "EnterPostproc"} <= kinds
    assert 0 < len(convert.lines) < seen_lines / 4  # candidates share most lines


def test_memo_is_bounded():
    convert = TraceJson(max_lines=40)  # about one 31-36 instruction matmul trace
    sizes = []
    for sch in generate_pool(matmul_module(32), TARGET, 10, seed=1):
        assert convert(sch.trace) == plain_json(sch.trace.as_json(remove_postproc=False))
        sizes.append(len(convert.lines))
        assert sizes[-1] <= 40  # emptied before a trace would overflow it
    assert any(b < a for a, b in zip(sizes, sizes[1:]))  # and it was emptied at least once


def dense_module(batch: int = 32, units: int = 64, depth: int = 64):
    """TOPI's dense, as ``ms.tune_tir`` users write it: its weight is a layout-free buffer, so
    the CPU postprocessor ``RewriteLayout`` adds a ``TransformLayout`` with an IndexMap input."""
    import tvm
    from tvm import te, topi

    x = te.placeholder((batch, depth), name="X")
    w = te.placeholder((units, depth), name="W")
    return tvm.IRModule({"main": te.create_prim_func([x, w, topi.nn.dense(x, w)])})


def test_layout_rewrite_traces_round_trip_through_pools_and_tvm_databases(tmp_path):
    """TransformLayout traces: as TVM's as_json, saved and reloaded in a pool, written to and
    read back from TVM's own JSONDatabase, with one program key on every path."""
    import tvm
    import tvm.s_tir.meta_schedule as ms

    from tcl.records.database import load_records
    from tcl.records.pools import load_pool, make_task, save_pool, trace_to_schedule
    from tcl.records.program_keys import program_key

    mod = dense_module()
    schedules = generate_pool(mod, TARGET, 12, seed=0)
    assert len(schedules) == 12
    layout = [s for s in schedules if any(i.kind.name == "TransformLayout" for i in s.trace.insts)]
    assert layout, "RewriteLayout added no TransformLayout: the test no longer covers IndexMap inputs"
    convert = TraceJson()
    for sch in layout:
        expected = plain_json(sch.trace.as_json(remove_postproc=False))
        assert convert(sch.trace) == expected
        (inst,) = [i for i in expected[0] if i[0] == "TransformLayout"]
        assert isinstance(inst[1][1], str) and '"tirx.IndexMap"' in inst[1][1]

    task = make_task(mod, name="dense")
    save_pool(tmp_path / "pool", [(task, layout)])
    pool = load_pool(tmp_path / "pool")
    assert pool.keys(task.key) == [program_key(s) for s in layout]

    (tmp_path / "tvm").mkdir()
    db = ms.database.JSONDatabase(work_dir=str(tmp_path / "tvm"))
    workload = db.commit_workload(mod)
    target = tvm.target.Target(TARGET)
    for sch in layout:
        db.commit_tuning_record(ms.database.TuningRecord(sch.trace, workload, [1e-3], target, None))
    text = (tmp_path / "tvm" / "database_tuning_record.json").read_text()
    assert '\\n  \\"root_index\\"' in text  # TVM writes the IndexMap indented, as_json compact
    records = load_records(tmp_path / "tvm")
    assert [program_key(p.trace) for p in records.programs[task.key]] == pool.keys(task.key)

    reloaded = ms.database.JSONDatabase(work_dir=str(tmp_path / "tvm")).get_all_tuning_records()
    for i, record in enumerate(reloaded):
        by_tvm = tvm.s_tir.Schedule(mod)
        record.trace.apply_to_schedule(by_tvm, remove_postproc=False)
        for trace in (pool.traces[task.key][i], records.programs[task.key][i].trace):
            assert trace_to_schedule(mod, trace).mod.script() == by_tvm.mod.script()
