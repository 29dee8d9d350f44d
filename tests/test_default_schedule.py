"""Default schedules: no function of a compiled network is left as plain serial loops, and the
defaults compute what the unscheduled function computes."""

from __future__ import annotations

import numpy as np
from conftest import matmul_module

TARGET = {"kind": "llvm", "mcpu": "core-avx2", "num-cores": 2}


def test_every_function_of_a_real_network_gets_a_schedule(tmp_path):
    from tcl.api.profiles import get_profile
    from tcl.measurement.networks import resolve_network
    from tcl.tuning.compile import compile_and_check

    _, definition = resolve_network("bert-tiny")
    profile = get_profile("x86-avx2")
    # an empty database: nothing tuned, so every function must get a default schedule
    check = compile_and_check(definition, profile.tvm_target(), tmp_path, profile.runtime_threads, repeats=2)
    assert check["tuned_functions"] == [] and check["unscheduled_functions"] == []
    assert len(check["default_functions"]) >= 10  # matmuls, softmax, layer norms, take, reshapes...
    assert check["max_rel_error"] < 1e-3  # compile_and_check also raises when outputs differ from torch


def test_parallel_vectorize_schedules_a_matmul_and_keeps_its_result():
    import tvm

    from tcl.measurement.default_schedule import apply_defaults, is_scheduled

    target = tvm.target.Target(TARGET)
    mod, chosen = apply_defaults(matmul_module(64), target)
    assert chosen == {"main": "ParallelVectorize"} and is_scheduled(mod["main"])
    script = mod.script()
    assert "T.parallel" in script and "T.vectorized" in script
    a, b = (np.random.default_rng(i).standard_normal((64, 64)).astype("float32") for i in range(2))
    out = tvm.runtime.tensor(np.zeros((64, 64), "float32"))
    tvm.compile(mod, target=target)(tvm.runtime.tensor(a), tvm.runtime.tensor(b), out)
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-4, atol=1e-4)
