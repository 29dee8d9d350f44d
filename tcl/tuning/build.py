"""Building a network from tuning records: each function's schedule from a MetaSchedule
database, the model's picks or a default schedule, lowered with Relax's CPU pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from tcl.measurement.default_schedule import apply_defaults, is_scheduled
from tcl.measurement.tasks import import_network, prepare_for_tuning
from tcl.records.tvm_log import quiet_tvm_warnings


def compile_network(
    definition: Any,
    target: Any,
    db_dir: Path,
    *,
    chosen: Mapping[str, Any] | None = None,
    use_default: set[str] | frozenset[str] = frozenset(),
) -> tuple[Any, dict[str, Any], Any]:
    """The network built with the best records of ``db_dir`` (see
    :func:`tcl.tuning.compile.compile_and_check` for ``chosen`` and ``use_default``), unchecked:
    ``(executable, functions by how they were scheduled, the Relax module the tasks come from)``."""
    import tvm.s_tir.meta_schedule as ms

    mod = prepared_network(definition, target)
    with quiet_tvm_warnings():
        executable, functions = compile_prepared(
            mod, target, ms.database.JSONDatabase(work_dir=str(db_dir)), chosen or {}, use_default
        )
    return executable, functions, mod


def prepared_network(definition: Any, target: Any) -> Any:
    """The network's Relax module as tuning extracted its tasks from it (fused, legalized)."""
    with quiet_tvm_warnings():
        return prepare_for_tuning(import_network(definition), target)


def compile_prepared(
    mod: Any,
    target: Any,
    database: Any,
    chosen: Mapping[str, Any],
    use_default: set[str] | frozenset[str] = frozenset(),
) -> tuple[Any, dict[str, Any]]:
    """``MetaScheduleApplyDatabase`` on the module the tasks were extracted from, the
    ``chosen`` schedules for functions it did not schedule (``model``), default
    schedules (:mod:`tcl.measurement.default_schedule`) for every function it left unscheduled, then TVM's
    lowering, via ``tvm.compile``; also which functions got a tuned schedule (``tuned``), which
    a default one (``default``: name → rule) and which none (``unscheduled``). Not
    ``ms.relax_integration.compile_relax``: it runs
    LegalizeOps/FuseOps/FuseTIR again, which on our already fused module re-fuses the
    functions (measured on bert-tiny: none of the 8 tuned matmul/norm tasks was then found
    in the database, and the network ran ~50x slower than the sum of its tuned kernels)."""
    import tvm
    from tvm import relax

    T = relax.transform
    # after applying the database: what compile_relax runs after fusion on CPU targets (TVM 0.27 has no CPU entry in
    # relax.pipeline.dataflow_lower_passes / finalize_passes)
    passes = [
        T.RewriteDataflowReshape(),
        T.ToNonDataflow(),
        T.RemovePurityChecking(),
        T.CallTIRRewrite(),
        T.StaticPlanBlockMemory(),
        T.LowerAllocTensor(),
        T.KillAfterLastUse(),
        T.LowerRuntimeBuiltin(),
        T.ComputePrimValue(),
        T.VMShapeLower(),
        T.AttachGlobalSymbol(),
    ]

    functions: dict[str, Any] = {}

    @tvm.transform.module_pass(opt_level=3)
    def pipeline(mod: Any, _ctx: Any) -> Any:
        unscheduled = {gv.name_hint: f for gv, f in mod.functions.items() if gv.name_hint in use_default}
        mod = T.MetaScheduleApplyDatabase()(mod)
        for gv in list(mod.get_global_vars()):
            if gv.name_hint in unscheduled:
                mod[gv] = unscheduled[gv.name_hint]
        functions["tuned"] = sorted(
            gv.name_hint for gv, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc) and is_scheduled(f)
        )
        functions["model"] = []
        for gv, func in list(mod.functions_items()):
            if gv.name_hint in chosen and isinstance(func, tvm.tirx.PrimFunc) and not is_scheduled(func):
                mod[gv] = _in_place_of(chosen[gv.name_hint], func)
                functions["model"].append(gv.name_hint)
        mod, functions["default"] = apply_defaults(mod, target)
        functions["unscheduled"] = sorted(
            gv.name_hint for gv, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc) and not is_scheduled(f)
        )
        return tvm.transform.Sequential(passes)(mod)

    with target, database, tvm.transform.PassContext(opt_level=3):
        return tvm.compile(mod, target=target, relax_pipeline=pipeline), functions


def _in_place_of(scheduled: Any, func: Any) -> Any:
    """``scheduled`` (a task's PrimFunc, named ``main``) under ``func``'s attributes, marked scheduled."""
    for key, value in func.attrs.items():
        scheduled = scheduled.with_attr(key, value)
    return scheduled.with_attr("tirx.is_scheduled", True)
