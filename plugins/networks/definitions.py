"""The built-in networks as :class:`NetworkDefinition` factories: each builds its torch module
with seeded weights and example inputs (the registered factories).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from tcl.api.interfaces import NetworkDefinition
from tcl_plugins.networks.cnn import DeepLabV3Head, DenseNet121, GoogLeNet, ResNet18, ResNet50, SqueezeNet11, UNet
from tcl_plugins.networks.mobile import EfficientNetB0, MobileNetV2, MobileNetV3Large, ShuffleNetV2
from tcl_plugins.networks.transformers import (
    BertEncoder,
    GptDecoder,
    LlamaBlock,
    MlpMixer,
    VisionTransformer,
    Wav2Vec2Encoder,
)


def _randomize_batchnorm(module: nn.Module, generator: torch.Generator) -> None:
    """Give BatchNorm layers non-trivial running statistics and affine parameters.

    Fresh BatchNorm is the identity (mean 0, var 1, weight 1, bias 0); with random stats a
    compiled network that dropped or mis-folded a BatchNorm would no longer match torch.
    """
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n, generator=generator) * 0.1)
            m.running_var.copy_(torch.rand(n, generator=generator) * 0.5 + 0.75)
            m.weight.data.copy_(torch.rand(n, generator=generator) * 0.5 + 0.75)
            m.bias.data.copy_(torch.randn(n, generator=generator) * 0.1)


def _build(
    make: Callable[[], nn.Module], make_inputs: Callable[[torch.Generator], tuple[torch.Tensor, ...]], seed: int
) -> NetworkDefinition:
    """Build a module and its inputs under ``seed`` without touching the caller's RNG state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = make()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        _randomize_batchnorm(module, generator)
    return NetworkDefinition(module=module.eval(), example_inputs=make_inputs(generator))


def _image(batch_size: int, size: int = 224) -> Callable[[torch.Generator], tuple[torch.Tensor, ...]]:
    return lambda g: (torch.randn(batch_size, 3, size, size, generator=g),)


def _tokens(batch_size: int, seq_len: int, vocab: int) -> Callable[[torch.Generator], tuple[torch.Tensor, ...]]:
    return lambda g: (torch.randint(0, vocab, (batch_size, seq_len), generator=g),)


def resnet18(*, seed: int = 0, batch_size: int = 1) -> NetworkDefinition:
    return _build(ResNet18, _image(batch_size), seed)


def mobilenet_v2(*, seed: int = 0, batch_size: int = 1) -> NetworkDefinition:
    return _build(MobileNetV2, _image(batch_size), seed)


def bert_tiny(*, seed: int = 0, batch_size: int = 1, seq_len: int = 128) -> NetworkDefinition:
    make = lambda: BertEncoder(vocab=30522, dim=128, layers=2, heads=2, mlp_dim=512, seq_len=seq_len)  # noqa: E731
    return _build(make, _tokens(batch_size, seq_len, 30522), seed)


def vit_tiny(*, seed: int = 0, batch_size: int = 1) -> NetworkDefinition:
    make = lambda: VisionTransformer(image=224, patch=16, dim=192, depth=12, heads=3, mlp_dim=768)  # noqa: E731
    return _build(make, _image(batch_size), seed)


def mlp_mixer(*, seed: int = 0, batch_size: int = 1) -> NetworkDefinition:
    make = lambda: MlpMixer(image=224, patch=16, dim=512, depth=8, token_mlp=256, channel_mlp=2048)  # noqa: E731
    return _build(make, _image(batch_size), seed)


def gpt_block(*, seed: int = 0, batch_size: int = 1, seq_len: int = 128) -> NetworkDefinition:
    make = lambda: GptDecoder(vocab=50257, dim=768, layers=2, heads=12, seq_len=seq_len)  # noqa: E731
    return _build(make, _tokens(batch_size, seq_len, 50257), seed)


def gpt_medium_b4(*, seed: int = 0, batch_size: int = 4, seq_len: int = 256) -> NetworkDefinition:
    make = lambda: GptDecoder(vocab=50257, dim=1024, layers=1, heads=16, seq_len=seq_len)  # noqa: E731
    return _build(make, _tokens(batch_size, seq_len, 50257), seed)


def _tensor(*shape: int) -> Callable[[torch.Generator], tuple[torch.Tensor, ...]]:
    return lambda g: (torch.randn(*shape, generator=g),)


def resnet50(*, seed: int = 0, batch_size: int = 1) -> NetworkDefinition:
    return _build(ResNet50, _image(batch_size), seed)


def resnet50_b8(*, seed: int = 0, batch_size: int = 8) -> NetworkDefinition:
    return resnet50(seed=seed, batch_size=batch_size)


def resnext50(*, seed: int = 0, batch_size: int = 1) -> NetworkDefinition:
    return _build(lambda: ResNet50(groups=32, width_per_group=4), _image(batch_size), seed)


def mobilenet_v3(*, seed: int = 0, batch_size: int = 1) -> NetworkDefinition:
    return _build(MobileNetV3Large, _image(batch_size), seed)


def efficientnet_b0(*, seed: int = 0, batch_size: int = 1) -> NetworkDefinition:
    return _build(EfficientNetB0, _image(batch_size), seed)


def densenet121(*, seed: int = 0, batch_size: int = 1) -> NetworkDefinition:
    return _build(DenseNet121, _image(batch_size), seed)


def squeezenet(*, seed: int = 0, batch_size: int = 1) -> NetworkDefinition:
    return _build(SqueezeNet11, _image(batch_size), seed)


def googlenet(*, seed: int = 0, batch_size: int = 1) -> NetworkDefinition:
    return _build(GoogLeNet, _image(batch_size), seed)


def shufflenet_v2(*, seed: int = 0, batch_size: int = 1) -> NetworkDefinition:
    return _build(ShuffleNetV2, _image(batch_size), seed)


def unet(*, seed: int = 0, batch_size: int = 1, size: int = 256) -> NetworkDefinition:
    return _build(UNet, _image(batch_size, size), seed)


def deeplabv3_head(*, seed: int = 0, batch_size: int = 1) -> NetworkDefinition:
    return _build(DeepLabV3Head, _tensor(batch_size, 1024, 33, 33), seed)


def bert_base(*, seed: int = 0, batch_size: int = 1, seq_len: int = 128, layers: int = 1) -> NetworkDefinition:
    make = lambda: BertEncoder(vocab=30522, dim=768, layers=layers, heads=12, mlp_dim=3072, seq_len=seq_len)  # noqa: E731
    return _build(make, _tokens(batch_size, seq_len, 30522), seed)


def bert_base_b8(*, seed: int = 0, batch_size: int = 8, seq_len: int = 128) -> NetworkDefinition:
    return bert_base(seed=seed, batch_size=batch_size, seq_len=seq_len)


def vit_base(*, seed: int = 0, batch_size: int = 1, depth: int = 1) -> NetworkDefinition:
    make = lambda: VisionTransformer(image=224, patch=16, dim=768, depth=depth, heads=12, mlp_dim=3072)  # noqa: E731
    return _build(make, _image(batch_size), seed)


def llama_block(*, seed: int = 0, batch_size: int = 1, seq_len: int = 128) -> NetworkDefinition:
    make = lambda: LlamaBlock(dim=2048, heads=32, kv_heads=4, hidden=5632, seq_len=seq_len)  # noqa: E731
    return _build(make, _tensor(batch_size, seq_len, 2048), seed)


def wav2vec2(*, seed: int = 0, batch_size: int = 1) -> NetworkDefinition:
    return _build(Wav2Vec2Encoder, _tensor(batch_size, 1, 16000), seed)


def mobilenet_v2_nhwc(*, seed: int = 0, batch_size: int = 1) -> NetworkDefinition:
    definition = mobilenet_v2(seed=seed, batch_size=batch_size)
    return NetworkDefinition(module=definition.module, example_inputs=definition.example_inputs, layout="NHWC")
