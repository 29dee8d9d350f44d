"""Built-in networks and task extraction, with real torch modules and real TVM passes."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

from tcl.api.errors import TclError
from tcl.api.interfaces import NetworkDefinition
from tcl.api.registrations import NetworkRegistration
from tcl.measurement.tasks import (
    ExtractedTask,
    extract_tasks,
    has_reduction,
    import_network,
    prepare_for_tuning,
    task_key,
)
from tcl_plugins.networks.definitions import bert_tiny, mlp_mixer, resnet18
from tcl_plugins.networks.register import tcl_register_networks

TARGET = {"kind": "llvm", "mcpu": "core-avx2", "num-cores": 2}

EXPECTED_OUTPUT = {
    "resnet-18": (1, 1000),
    "mobilenet-v2": (1, 1000),
    "bert-tiny": (1, 128, 128),
    "vit-tiny": (1, 1000),
    "mlp-mixer": (1, 1000),
    "gpt-block": (1, 128, 768),
    "gpt-medium-b4": (4, 256, 1024),
    "resnet-50": (1, 1000),
    "resnet-50-b8": (8, 1000),
    "resnext-50": (1, 1000),
    "densenet-121": (1, 1000),
    "googlenet": (1, 1000),
    "squeezenet": (1, 1000),
    "mobilenet-v3": (1, 1000),
    "mobilenet-v2-nhwc": (1, 1000),
    "efficientnet-b0": (1, 1000),
    "shufflenet-v2": (1, 1000),
    "unet": (1, 2, 256, 256),
    "deeplabv3-head": (1, 21, 33, 33),
    "bert-base": (1, 128, 768),
    "bert-base-b8": (8, 128, 768),
    "vit-base": (1, 1000),
    "llama-block": (1, 128, 2048),
    "wav2vec2": (1, 49, 768),
}
#: Cheap to run (about a second each on 2 cores) and to extract; the others run in the slow tests.
FAST_RUN = {"bert-tiny", "vit-tiny", "gpt-block", "bert-base", "vit-base", "llama-block", "wav2vec2"}
FAST_EXTRACT = {"llama-block", "wav2vec2"}

REGISTRATIONS = {r.name: r for r in tcl_register_networks()}


def _marked(names, fast):
    return [n if n in fast else pytest.param(n, marks=pytest.mark.slow) for n in sorted(names)]


def test_registrations_are_named_records_of_many_families():
    assert set(REGISTRATIONS) == set(EXPECTED_OUTPUT)
    assert len(REGISTRATIONS) >= 20
    assert all(isinstance(r, NetworkRegistration) for r in REGISTRATIONS.values())
    assert len({r.family for r in REGISTRATIONS.values()}) >= 10


@pytest.mark.parametrize("name", _marked(EXPECTED_OUTPUT, FAST_RUN))
def test_factory_builds_an_eval_module_that_runs(name):
    definition = REGISTRATIONS[name].factory()
    assert isinstance(definition, NetworkDefinition)
    assert not definition.module.training
    assert all(x.shape[0] == EXPECTED_OUTPUT[name][0] for x in definition.example_inputs)
    with torch.no_grad():
        out = definition.module(*definition.example_inputs)
    assert tuple(out.shape) == EXPECTED_OUTPUT[name]
    assert torch.isfinite(out).all()


def test_suite_has_every_conv2d_kernel_stride_dilation_and_grouping_batch_and_layout():
    """The operator variety the dataset is built for: conv2d kernels 1/3/5/7, strides 1/2,
    dilation, groups (grouped and depthwise), conv1d, transposed conv, batch > 1 and NHWC."""
    definitions = {name: r.factory() for name, r in REGISTRATIONS.items()}
    convs = [m for d in definitions.values() for m in d.module.modules() if type(m) is nn.Conv2d]
    assert {m.kernel_size[0] for m in convs} >= {1, 3, 5, 7}
    assert {m.stride[0] for m in convs} >= {1, 2}
    assert {m.dilation[0] for m in convs} >= {2, 6, 12, 18}
    assert any(1 < m.groups < m.in_channels for m in convs)  # ResNeXt's 32 groups
    assert any(m.groups == m.in_channels > 1 for m in convs)  # depthwise
    kinds = {type(m) for d in definitions.values() for m in d.module.modules()}
    assert {nn.Conv1d, nn.ConvTranspose2d, nn.GroupNorm, nn.Hardswish, nn.SiLU} <= kinds
    assert max(d.example_inputs[0].shape[0] for d in definitions.values()) == 8
    assert {d.layout for d in definitions.values()} == {"NCHW", "NHWC"}


@pytest.mark.parametrize("name", _marked(EXPECTED_OUTPUT, FAST_EXTRACT))
def test_network_extracts_tasks(name):
    """Every network imports into TVM and gives tuning tasks (the fast ones by default)."""
    tasks = extract_tasks(REGISTRATIONS[name].factory(), TARGET)
    assert tasks and all(t.flops > 0 and has_reduction(t.mod) for t in tasks)
    assert len({t.key for t in tasks}) == len(tasks)


def test_factory_is_deterministic_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    a, b = bert_tiny(seed=7), bert_tiny(seed=7)
    assert torch.equal(torch.random.get_rng_state(), before)
    assert torch.equal(a.example_inputs[0], b.example_inputs[0])
    with torch.no_grad():
        assert torch.equal(a.module(*a.example_inputs), b.module(*a.example_inputs))
    c = bert_tiny(seed=8)
    assert not torch.equal(a.module.word.weight, c.module.word.weight)


# ---- task extraction ------------------------------------------------------------------


class SmallCnn(nn.Module):
    """conv-BN-ReLU, a residual conv-BN, global pooling and a classifier, at 32x32."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.conv2 = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16))
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        y = self.conv1(x)
        y = torch.relu(self.conv2(y) + y)
        return self.fc(y.mean(dim=(2, 3)))


def small_cnn() -> NetworkDefinition:
    torch.manual_seed(0)
    module = SmallCnn()
    with torch.no_grad():  # non-trivial statistics, so a lost BatchNorm shows in the outputs
        for bn in (module.conv1[1], module.conv2[1]):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.uniform_(0.5, 1.5)
    return NetworkDefinition(module=module.eval(), example_inputs=(torch.randn(1, 3, 32, 32),))


@pytest.fixture(scope="module")
def cnn_tasks():
    return extract_tasks(small_cnn(), TARGET)


def test_cnn_tasks_are_fused_convolutions_without_batch_norm(cnn_tasks):
    assert cnn_tasks and all(isinstance(t, ExtractedTask) for t in cnn_tasks)
    for t in cnn_tasks:
        assert isinstance(t.weight, int) and t.weight >= 1
        assert t.flops > 0 and has_reduction(t.mod)
        assert [gv.name_hint for gv in t.mod.get_global_vars()] == ["main"]
    names = [t.name for t in cnn_tasks]
    conv = [n for n in names if "conv2d" in n]
    assert len(conv) == 2, names
    # BatchNorm folded into the conv: epilogues are bias add (+ residual) (+ relu), no BN arithmetic
    assert not any(op in n for n in names for op in ("batch_norm", "subtract", "divide", "sqrt")), names
    assert any("matmul" in n for n in names) and "mean" in names
    assert cnn_tasks[0].weight * cnn_tasks[0].flops == max(t.weight * t.flops for t in cnn_tasks)


def test_prepared_module_computes_what_torch_computes():
    """Catches TVM 0.27's misimport of aten.batch_norm (epsilon from momentum, training mode)."""
    import tvm
    from tvm import relax

    definition = small_cnn()
    target = tvm.target.Target(TARGET)
    mod = prepare_for_tuning(import_network(definition), target)
    vm = relax.VirtualMachine(tvm.compile(mod, target=target), tvm.cpu())
    out = vm["main"](tvm.runtime.tensor(definition.example_inputs[0].numpy()))[0].numpy()
    with torch.no_grad():
        ref = definition.module(*definition.example_inputs).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


def test_simple_tasks_are_dropped_unless_asked_for():
    definition = bert_tiny()
    kept = extract_tasks(definition, TARGET)
    every = extract_tasks(definition, TARGET, include_simple_tasks=True)
    kept_keys, every_keys = {t.key for t in kept}, {t.key for t in every}
    assert kept_keys < every_keys
    dropped = [t for t in every if t.key not in kept_keys]
    assert all(not has_reduction(t.mod) for t in dropped)
    assert any(t.name == "take" for t in dropped)  # the embedding lookup
    names = [t.name for t in kept]
    assert any("matmul" in n and "gelu" in n for n in names), names  # GELU fused into its matmul
    assert "softmax" in names and "layer_norm" in names
    layer_norm = next(t for t in kept if t.name == "layer_norm")
    assert layer_norm.weight == 5  # embeddings + 2 per layer


class TwoLayers(nn.Module):
    """Some ops, then the shared Linear(64, 64) + ReLU, then more ops; ``first`` reorders them
    so the shared workload gets a different name and position in each network."""

    def __init__(self, first: bool):
        super().__init__()
        self.first = first
        self.shared = nn.Sequential(nn.Linear(64, 64), nn.ReLU())
        self.other = nn.Linear(64, 32) if first else nn.Linear(32, 64)

    def forward(self, x):
        return self.other(self.shared(x)) if self.first else self.shared(self.other(x))


def _definition(module: nn.Module, width: int) -> NetworkDefinition:
    torch.manual_seed(1)
    return NetworkDefinition(module=module.eval(), example_inputs=(torch.randn(1, width),))


def test_same_workload_gets_same_key_across_networks(tmp_path):
    a = extract_tasks(_definition(TwoLayers(first=True), 64), TARGET)
    b = extract_tasks(_definition(TwoLayers(first=False), 32), TARGET)
    shared = {t.key for t in a} & {t.key for t in b}
    assert len(shared) == 1
    (ta,) = [t for t in a if t.key in shared]
    (tb,) = [t for t in b if t.key in shared]
    assert ta.name != tb.name  # fused_matmul_add_relu vs fused_matmul1_add1_relu: names don't matter

    # The key is what TVM's JSONDatabase writes for this workload.
    from tvm.s_tir.meta_schedule.database import JSONDatabase

    db = JSONDatabase(work_dir=str(tmp_path))
    db.commit_workload(ta.mod)
    first_line = (tmp_path / "database_workload.json").read_text().splitlines()[0]
    assert json.loads(first_line)[0] == ta.key == task_key(tb.mod)


def test_real_networks_share_the_classifier_task():
    """ResNet-18 and MLP-Mixer both end in Linear(512, 1000) on one vector."""
    resnet = {t.key: t for t in extract_tasks(resnet18(), TARGET)}
    mixer = {t.key: t for t in extract_tasks(mlp_mixer(), TARGET)}
    shared = set(resnet) & set(mixer)
    assert len(shared) == 1
    assert "matmul" in resnet[shared.pop()].name
    assert all(
        "conv2d" in t.name for t in resnet.values() if t.name not in ("max_pool2d", "mean") and "matmul" not in t.name
    )


def test_bad_target_is_a_tcl_error():
    with pytest.raises(TclError):
        extract_tasks(small_cnn(), "llvm -mcpu=core-avx2")


def test_nhwc_network_compiles_to_nhwc_convolutions_that_compute_what_torch_computes():
    """``layout="NHWC"``: the conv tasks take NHWC data and HWIO weights (BatchNorm still
    folded), and the whole compiled network still matches torch."""
    import attrs
    import tvm
    from tvm import relax

    definition = attrs.evolve(small_cnn(), layout="NHWC")
    target = tvm.target.Target(TARGET)
    mod = prepare_for_tuning(import_network(definition), target)
    vm = relax.VirtualMachine(tvm.compile(mod, target=target), tvm.cpu())
    out = vm["main"](tvm.runtime.tensor(definition.example_inputs[0].numpy()))[0].numpy()
    with torch.no_grad():
        ref = definition.module(*definition.example_inputs).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)

    tasks = extract_tasks(definition, TARGET)
    (first,) = [
        t for t in tasks if "conv2d" in t.name and "T.int64(3), T.int64(3), T.int64(3), T.int64(16)" in t.mod.script()
    ]
    assert "T.Buffer((T.int64(1), T.int64(32), T.int64(32), T.int64(3))" in first.mod.script()  # NHWC image
    assert not any(op in t.name for t in tasks for op in ("batch_norm", "subtract", "sqrt"))
    nchw = {t.key for t in extract_tasks(small_cnn(), TARGET)}
    assert not nchw & {t.key for t in tasks if "conv2d" in t.name}
    with pytest.raises(ValueError):
        NetworkDefinition(module=definition.module, example_inputs=definition.example_inputs, layout="NCWH")


class PreActivation(nn.Module):
    """DenseNet's order: BatchNorm → ReLU → conv, a BatchNorm that follows no convolution."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(8)
        self.conv = nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x):
        return self.conv(torch.relu(self.bn(x)))


def test_batch_norm_after_no_conv_becomes_a_constant_scale_and_shift():
    import tvm
    from tvm import relax

    from tcl.measurement.tasks import _batch_norm_to_scale_shift

    torch.manual_seed(0)
    module = PreActivation().eval()
    with torch.no_grad():
        module.bn.running_mean.uniform_(-0.5, 0.5)
        module.bn.running_var.uniform_(0.5, 2.0)
        module.bn.weight.uniform_(0.5, 1.5)
        module.bn.bias.uniform_(-0.5, 0.5)
    definition = NetworkDefinition(module=module, example_inputs=(torch.randn(2, 8, 16, 16),))
    imported = import_network(definition)
    assert "batch_norm" in imported.script()
    assert "batch_norm" not in _batch_norm_to_scale_shift(imported).script()
    target = tvm.target.Target(TARGET)
    vm = relax.VirtualMachine(tvm.compile(prepare_for_tuning(imported, target), target=target), tvm.cpu())
    out = vm["main"](tvm.runtime.tensor(definition.example_inputs[0].numpy()))[0].numpy()
    with torch.no_grad():
        ref = module(*definition.example_inputs).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
