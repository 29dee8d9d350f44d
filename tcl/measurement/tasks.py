"""Tuning tasks of a network: torch module → Relax → fused TIR PrimFuncs, as MetaSchedule tunes them.

Pipeline (and why each step is there):

1. ``torch.export.export`` then ``tvm.relax.frontend.torch.from_exported_program`` with
   weights bound as constants. By default the exported program is *not* run through ATen
   decompositions (``run_ep_decomposition=False``): decomposing turns every ``nn.Linear`` into
   reshape → addmm → reshape and every batched matmul into expand/reshape/bmm, which splits
   GELU and residual adds away from their matmul and leaves a dozen data-movement tasks per
   attention block. Networks whose high-level ops the importer lacks fall back to the
   decomposed program. TVM 0.27 imports the undecomposed ``aten.batch_norm`` wrongly (it
   reads ``training`` as momentum and ``momentum`` as epsilon and emits a training-mode
   batch norm: ResNet-18's outputs were off by 0.73), so we convert that op ourselves.
2. Inference simplification, so tasks look like those of a real compiled network:
   BatchNorm that follows a convolution is folded into the convolution's weights and a bias
   (done in numpy here: TVM's ``FoldBatchnormToConv2D`` leaves the arithmetic to
   ``FoldConstant``, which JIT-compiles a kernel per constant expression and took 13 s on
   ResNet-18); any other BatchNorm with constant statistics (DenseNet's pre-activation
   BatchNorm) becomes ``x * scale + shift`` with the constants computed in numpy too
   (decomposed and left to ``FoldConstant``, DenseNet-121's took 23 s), and the rest is
   decomposed by ``DecomposeOpsForInference``.
3. TVM's own lowering before tuning (the "zero" pipeline that
   ``relax.pipeline.static_shape_tuning_pipeline`` runs before ``MetaScheduleTuneIRMod``):
   ``LegalizeOps`` → ``AnnotateTIROpPattern`` → ``FoldConstant`` → ``FuseOps`` → ``FuseTIR``.
4. ``tvm.s_tir.meta_schedule.relax_integration.extract_tasks``: one task per distinct fused
   PrimFunc (structural equality), weight = number of call sites.

Dropped tasks (``include_simple_tasks=False``, the default): tasks with no reduction
(no block with a reduction iterator): pure data movement (reshape, transpose, split,
concat, take/embedding lookups, casts) and stand-alone elementwise ops. This is the rule of
auto_scheduler's ``extract_tasks(include_simple_tasks=False)``, which TenSet's dataset was
built with. Such tasks have almost no schedule space (only parallel/vectorize/unroll),
pure reshapes become free views at build time (``RewriteDataflowReshape``), and in the
built-in networks each does at most ~1e5 FLOPs. Pass ``include_simple_tasks=True`` to get
exactly MetaSchedule's list.

``ExtractedTask.key`` is the workload's structural hash exactly as MetaSchedule's
``JSONDatabase`` writes it in ``database_workload.json``, so tasks of different networks
with the same workload share a key and their records merge.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

import attrs

from tcl.api.errors import TclError
from tcl.api.interfaces import NetworkDefinition
from tcl.records.tvm_log import quiet_tvm_warnings

log = logging.getLogger(__name__)


@attrs.frozen(kw_only=True, eq=False)
class ExtractedTask:
    """One tuning task of a network.

    ``mod`` is an IRModule with the task's PrimFunc as ``main``, the form MetaSchedule's
    ``TuneContext`` and database use; ``weight`` is how many times the network calls it;
    ``key`` its structural hash string (the workload key of a JSONDatabase); ``flops`` TVM's
    estimate of its floating-point operations per call.
    """

    name: str
    mod: Any
    weight: int
    key: str
    flops: float = 0.0


def as_target(target: Any) -> Any:
    """A ``tvm.target.Target`` from a Target or a target dict (the string form is refused by TVM)."""
    import tvm

    if isinstance(target, tvm.target.Target):
        return target
    if isinstance(target, Mapping):
        return tvm.target.Target(dict(target))
    raise TclError(f"target must be a tvm.target.Target or a dict like {{'kind': 'llvm', ...}}, got {target!r}")


def task_key(mod: Any) -> str:
    """The workload key of ``mod`` (an IRModule or PrimFunc), as in ``database_workload.json``."""
    from tvm.s_tir.meta_schedule.database import Workload

    return str(Workload(_normalize(mod)).as_json()[0])


def import_network(definition: NetworkDefinition, *, decompose_aten: bool | None = None) -> Any:
    """Export ``definition``'s module with torch.export and import it into Relax (weights as constants).

    ``decompose_aten`` None (default) tries the undecomposed program first and falls back to
    ATen decompositions when the importer does not support an op; True/False force one. A
    definition with ``layout="NHWC"`` gets its convolutions in NHWC/HWIO (BatchNorm folded first).
    """
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    module = definition.module.eval()
    try:
        with torch.no_grad():
            exported = torch.export.export(module, tuple(definition.example_inputs))
    except Exception as exc:  # torch raises many types; the user needs the message
        raise TclError(f"torch.export failed for {type(module).__name__}: {exc}") from exc
    attempts = [False, True] if decompose_aten is None else [decompose_aten]
    for i, decompose in enumerate(attempts):
        try:
            custom = {} if decompose else {"batch_norm.default": _convert_batch_norm}
            mod = from_exported_program(exported, run_ep_decomposition=decompose, custom_convert_map=custom)
        except Exception as exc:
            if i + 1 < len(attempts):
                log.info("importing without ATen decompositions failed (%s); retrying decomposed", exc)
                continue
            raise TclError(f"TVM could not import {type(module).__name__}: {exc}") from exc
        return _convert_layout(mod, definition.layout)
    raise AssertionError("unreachable")


def prepare_for_tuning(mod: Any, target: Any) -> Any:
    """Inference simplification and TVM's pre-tuning lowering (steps 2 and 3 of the module doc)."""
    import tvm
    from tvm import relax

    T = relax.transform
    mod = _batch_norm_to_scale_shift(_fold_batch_norm_into_conv2d(mod))
    passes = [
        T.DecomposeOpsForInference(),
        T.CanonicalizeBindings(),
        T.LegalizeOps(),
        T.AnnotateTIROpPattern(),
        T.FoldConstant(),
        T.FuseOps(),
        T.FuseTIR(),
    ]
    with as_target(target):
        return tvm.transform.Sequential(passes)(mod)


def extract_tasks(
    definition: NetworkDefinition,
    target: Any,
    *,
    include_simple_tasks: bool = False,
    decompose_aten: bool | None = None,
) -> list[ExtractedTask]:
    """The tuning tasks of a network for ``target``, most work (weight x flops) first.

    See the module docstring for the pipeline and for which tasks ``include_simple_tasks``
    drops.
    """
    from tvm.s_tir.analysis import estimate_tir_flops
    from tvm.s_tir.meta_schedule.relax_integration import extract_tasks as ms_extract_tasks

    target = as_target(target)
    with quiet_tvm_warnings():  # lowering take() warns once per embedding lookup
        mod = prepare_for_tuning(import_network(definition, decompose_aten=decompose_aten), target)
        extracted = list(ms_extract_tasks(mod, target))
    tasks = []
    for task in extracted:
        task_mod = _normalize(task.dispatched[0])
        if not include_simple_tasks and not has_reduction(task_mod):
            continue
        tasks.append(
            ExtractedTask(
                name=str(task.task_name),
                mod=task_mod,
                weight=int(task.weight),
                key=task_key(task_mod),
                flops=float(estimate_tir_flops(task_mod)),
            )
        )
    tasks.sort(key=lambda t: (-t.weight * t.flops, t.name))
    return tasks


def has_reduction(mod: Any) -> bool:
    """Whether ``mod``'s ``main`` has a block with a reduction iterator (conv, matmul, pooling,
    softmax, norms...), i.e. is not a "simple" task."""
    from tvm.s_tir import Schedule
    from tvm.tirx import IterVar

    sch = Schedule(_normalize(mod))
    stack = list(sch.get_child_blocks(sch.get_sblock("root")))
    while stack:
        block = stack.pop()
        if any(int(iv.iter_type) == IterVar.CommReduce for iv in sch.get(block).iter_vars):
            return True
        stack.extend(sch.get_child_blocks(block))
    return False


# ---- helpers -----------------------------------------------------------------------------


def _convert_batch_norm(node: Any, importer: Any) -> Any:
    """Import ``aten.batch_norm(x, weight, bias, mean, var, training, momentum, eps, cudnn)``.

    TVM 0.27 maps this op to its ``_native_batch_norm_legit_no_training`` converter, whose
    argument positions differ: it takes ``training`` as momentum and ``momentum`` (0.1) as
    epsilon and emits a training-mode batch norm (batch statistics), which is wrong for
    inference and blocks BatchNorm folding.
    """
    import numpy as np
    from tvm import relax

    args = list(node.args)
    defaults = {5: False, 6: 0.1, 7: 1e-5}
    names = {5: "training", 6: "momentum", 7: "eps"}
    for i in range(5, 8):
        if len(args) <= i:
            args.append(node.kwargs.get(names[i], defaults[i]))
    x = importer.env[args[0]]
    channels = int(x.ty.shape[1])
    dtype = str(x.ty.dtype.dtype)

    def const_or(arg: Any, fill: float) -> Any:
        return importer.env[arg] if arg is not None else relax.const(np.full(channels, fill), dtype)

    training = bool(args[5]) or args[3] is None or args[4] is None
    bn = importer.block_builder.emit(
        relax.op.nn.batch_norm(
            x,
            const_or(args[1], 1.0),
            const_or(args[2], 0.0),
            const_or(args[3], 0.0),
            const_or(args[4], 1.0),
            axis=1,
            epsilon=float(args[7]),
            center=args[2] is not None,
            scale=args[1] is not None,
            momentum=float(args[6]),
            training=training,
        )
    )
    return importer.block_builder.emit(relax.TupleGetItem(bn, 0))


def _convert_layout(mod: Any, layout: str) -> Any:
    """``mod`` with conv2d in ``layout``: NHWC data and HWIO weights, as TensorFlow and TFLite
    models import, by TVM's ``ConvertLayout`` (transposes at the graph's edges). The transposes
    of constants (weights, biases) are done in numpy, not JIT-compiled by ``FoldConstant``.
    BatchNorm is folded first, while convs are NCHW."""
    if layout == "NCHW":
        return mod
    import numpy as np
    from tvm import relax
    from tvm.relax.dpl import is_const, is_op, rewrite_call

    mod = _fold_batch_norm_into_conv2d(mod)
    mod = relax.transform.ConvertLayout({"relax.nn.conv2d": [layout, "HWIO"]})(mod)
    const = is_const()
    pattern = is_op("relax.permute_dims")(const)

    def transpose(expr: Any, matches: Mapping[Any, Any]) -> Any:
        axes = expr.attrs.axes
        value = matches[const].value.numpy()
        return relax.const(np.ascontiguousarray(np.transpose(value, None if axes is None else [int(a) for a in axes])))

    for gvar, func in list(mod.functions.items()):
        if isinstance(func, relax.Function):
            mod.update_func(gvar, rewrite_call(pattern, transpose, func))
    return mod


def _normalize(mod: Any) -> Any:
    """The IRModule MetaSchedule's TuneContext would make of ``mod`` (one PrimFunc named main).

    The name of the global function is part of the structural hash, so keys must be computed
    on exactly this form.
    """
    import tvm

    if isinstance(mod, tvm.tirx.PrimFunc):
        if not (mod.attrs and "global_symbol" in mod.attrs):
            mod = mod.with_attr("global_symbol", "main")
        mod = tvm.IRModule({"main": mod.with_attr("tirx.noalias", True)})
    gvars = mod.get_global_vars()
    if len(gvars) == 1 and gvars[0].name_hint != "main":
        mod = tvm.IRModule({"main": mod[gvars[0]]})
    return mod


def _batch_norm_to_scale_shift(mod: Any) -> Any:
    """Rewrite inference ``batch_norm(x)[0]`` with constant parameters into ``x * s + t``,
    s = gamma / sqrt(var + eps) and t = beta - mean * s computed in numpy, shaped to
    broadcast along the normalized axis."""
    import numpy as np
    from tvm import relax
    from tvm.relax.dpl import TupleGetItemPattern, is_const, is_op, rewrite_call, wildcard

    data = wildcard()
    gamma, beta, mean, var = is_const(), is_const(), is_const(), is_const()
    bn = is_op("relax.nn.batch_norm")(data, gamma, beta, mean, var)
    pattern = TupleGetItemPattern(bn, 0)

    def rewrite(expr: Any, matches: Mapping[Any, Any]) -> Any:
        attrs = matches[bn].attrs
        x = matches[data]
        ndim = int(getattr(x.ty, "ndim", -1))
        if bool(attrs.training) or ndim < 1:
            return expr
        g, b, m, v = (matches[p].value.numpy().astype(np.float64) for p in (gamma, beta, mean, var))
        if not bool(attrs.scale):
            g = np.ones_like(v)
        if not bool(attrs.center):
            b = np.zeros_like(v)
        scale = g / np.sqrt(v + float(attrs.epsilon))
        shape = [1] * ndim
        shape[int(attrs.axis) % ndim] = -1
        dtype = str(x.ty.dtype.dtype)
        s_const = relax.const(scale.reshape(shape).astype(dtype))
        t_const = relax.const((b - m * scale).reshape(shape).astype(dtype))
        return relax.op.add(relax.op.multiply(x, s_const), t_const)

    mod = mod.clone()
    for gvar, func in list(mod.functions.items()):
        if isinstance(func, relax.Function):
            mod.update_func(gvar, rewrite_call(pattern, rewrite, func))
    return mod


def _fold_batch_norm_into_conv2d(mod: Any) -> Any:
    """Rewrite ``batch_norm(conv2d(x, W))[0]`` with constant W and statistics into
    ``conv2d(x, W') + b`` (NCHW/OIHW, normalising axis 1), computing W' and b in numpy.

    W' = W * s per output channel and b = beta - mean * s, with s = gamma / sqrt(var + eps).
    Other BatchNorms are left for :func:`_batch_norm_to_scale_shift`.
    """
    import numpy as np
    from tvm import relax
    from tvm.relax.dpl import TupleGetItemPattern, is_const, is_op, rewrite_call, wildcard

    data, weight = wildcard(), is_const()
    gamma, beta, mean, var = is_const(), is_const(), is_const(), is_const()
    conv = is_op("relax.nn.conv2d")(data, weight)
    bn = is_op("relax.nn.batch_norm")(conv, gamma, beta, mean, var)
    pattern = TupleGetItemPattern(bn, 0)

    def rewrite(expr: Any, matches: Mapping[Any, Any]) -> Any:
        conv_call, bn_call = matches[conv], matches[bn]
        ca, ba = conv_call.attrs, bn_call.attrs
        if (
            str(ca.data_layout) != "NCHW"
            or str(ca.kernel_layout) != "OIHW"
            or str(ca.out_layout) != "NCHW"
            or int(ba.axis) != 1
            or bool(ba.training)
        ):
            return expr
        w = matches[weight].value.numpy()
        g, b, m, v = (matches[p].value.numpy().astype(np.float64) for p in (gamma, beta, mean, var))
        if not bool(ba.scale):
            g = np.ones_like(v)
        if not bool(ba.center):
            b = np.zeros_like(v)
        s = g / np.sqrt(v + float(ba.epsilon))
        new_w = (w.astype(np.float64) * s.reshape(-1, 1, 1, 1)).astype(w.dtype)
        bias = (b - m * s).astype(w.dtype).reshape(1, -1, 1, 1)
        folded = relax.Call(conv_call.op, [matches[data], relax.const(new_w)], ca)
        return relax.op.add(folded, relax.const(bias))

    mod = mod.clone()  # leave the caller's module alone
    for gvar, func in list(mod.functions.items()):
        if isinstance(func, relax.Function):
            mod.update_func(gvar, rewrite_call(pattern, rewrite, func))
    return mod
