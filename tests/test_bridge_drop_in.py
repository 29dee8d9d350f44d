"""Our checkpoints as a drop-in cost model for a TVM user's own ``ms.tune_tir``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import matmul_module

SHIPPED_MLP = Path(__file__).resolve().parents[1] / "plugins" / "pretrained" / "x86-avx2" / "mlp"
TARGET = {"kind": "llvm", "mcpu": "core-avx2", "num-cores": 2}


@pytest.mark.slow  # MetaSchedule's own tune_tir starts its worker pools: minutes on a busy 2-core machine
def test_plain_tune_tir_tunes_with_a_shipped_checkpoint(tmp_path):
    import tvm
    import tvm.s_tir.meta_schedule as ms

    from tcl.api.measure import FastLocalBuilder
    from tcl.tuning.bridge import load_cost_model

    cost_model = load_cost_model("mlp", profile="x86-avx2")
    assert isinstance(cost_model, ms.cost_model.CostModel)  # what ms.tune_tir checks before using it as is
    target = tvm.target.Target(TARGET)
    database = ms.tune_tir(
        matmul_module(64),
        target,
        str(tmp_path),
        max_trials_global=8,
        num_trials_per_iter=4,
        cost_model=cost_model,
        builder=FastLocalBuilder(),
    )  # TVM's LocalBuilder works too, slower
    assert cost_model.state.scales  # the search asked our model for scores
    records = database.get_all_tuning_records()
    assert len(records) == 8 and all(r.run_secs for r in records)
    sch = ms.tir_integration.compile_tir(database, matmul_module(64), target)
    a, b = (np.random.default_rng(i).standard_normal((64, 64)).astype("float32") for i in range(2))
    out = tvm.runtime.tensor(np.zeros((64, 64), "float32"))
    tvm.compile(sch.mod, target=target)(tvm.runtime.tensor(a), tvm.runtime.tensor(b), out)
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_a_directory_and_a_name_load_the_same_checkpoint_and_bad_ones_say_so(tmp_path):
    from tcl.api.errors import TclError
    from tcl.tuning.bridge import load_cost_model

    assert load_cost_model(SHIPPED_MLP).state.model.name == load_cost_model("mlp", profile="x86-avx2").state.model.name
    with pytest.raises(TclError, match="not a checkpoint directory"):
        load_cost_model(tmp_path)
    with pytest.raises(TclError, match="pretrained checkpoint for x86-avx2"):
        load_cost_model("gpt", profile="x86-avx2")
