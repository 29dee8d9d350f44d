"""Registers the built-in networks; their torch definitions in tcl_plugins.networks load on first use."""

from __future__ import annotations

from tcl.hookspecs import hookimpl
from tcl.registrations import Deferred, NetworkRegistration

IMPL = "tcl_plugins.networks"


@hookimpl
def tcl_register_networks() -> list[NetworkRegistration]:
    return [
        NetworkRegistration(
            name="resnet-18", factory=Deferred(IMPL, "resnet18"), family="cnn",
            description="ResNet-18, 224x224 image, batch 1 (basic residual blocks, BatchNorm folded at extraction)",
        ),
        NetworkRegistration(
            name="mobilenet-v2", factory=Deferred(IMPL, "mobilenet_v2"), family="cnn-mobile",
            description="MobileNetV2 width 1.0, 224x224 image, batch 1 (depthwise-separable inverted residuals)",
        ),
        NetworkRegistration(
            name="bert-tiny", factory=Deferred(IMPL, "bert_tiny"), family="transformer-encoder",
            description="BERT-tiny encoder: 2 layers, hidden 128, 2 heads, sequence 128, vocab 30522",
        ),
        NetworkRegistration(
            name="vit-tiny", factory=Deferred(IMPL, "vit_tiny"), family="vision-transformer",
            description="ViT-Ti/16: 224x224 image, 12 layers, dim 192, 3 heads",
        ),
        NetworkRegistration(
            name="mlp-mixer", factory=Deferred(IMPL, "mlp_mixer"), family="mlp-mixer",
            description="MLP-Mixer S/16: 224x224 image, 8 blocks, dim 512, token MLP 256, channel MLP 2048",
        ),
        NetworkRegistration(
            name="gpt-block", factory=Deferred(IMPL, "gpt_block"), family="transformer-decoder",
            description="GPT-2-small-width decoder: 2 causal blocks, dim 768, 12 heads, sequence 128",
        ),
    ]
