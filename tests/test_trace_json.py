"""The memoized trace JSON equals TVM's own ``as_json`` on real MetaSchedule candidates."""

from __future__ import annotations

from conftest import matmul_module

from tcl.pools import generate_pool
from tcl.trace_json import TraceJson, plain_json

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
