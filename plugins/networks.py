"""Built-in network suite: six small inference networks from different families, pure torch.

torchvision and transformers are not dependencies (and torchvision does not load here), so
each network is written out below at the widths of its well-known reference configuration.
That matters more than the weights: tuning tasks are defined by operator shapes, so
ResNet-18 written here yields the same convolution workloads as anyone's ResNet-18. The
weights are random (fixed seed) because task extraction and tuning never look at them.

Every factory returns a :class:`tcl.interfaces.NetworkDefinition` holding a module in eval
mode and its example inputs (batch 1 unless asked otherwise). Factories accept ``seed`` and
``batch_size`` keyword options, which a suite config may set.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from tcl.interfaces import NetworkDefinition

# ---- shared building blocks ------------------------------------------------------------


class ConvBNAct(nn.Sequential):
    """Conv2d (no bias) + BatchNorm + optional activation: the unit of both CNNs.

    The conv has no bias because BatchNorm follows; task extraction folds the BatchNorm into
    the conv, giving the conv+bias(+act) tasks of a real compiled CNN.
    """

    def __init__(self, cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1, act: nn.Module | None = None):
        layers: list[nn.Module] = [
            nn.Conv2d(cin, cout, kernel, stride, padding=kernel // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout),
        ]
        if act is not None:
            layers.append(act)
        super().__init__(*layers)


class SelfAttention(nn.Module):
    """Multi-head self-attention written with plain matmuls (BERT, ViT and GPT use it).

    Written out rather than using ``nn.MultiheadAttention`` or
    ``scaled_dot_product_attention`` so the exported graph is the textbook
    projection → (q·kᵀ)/√d → softmax → ·v → projection, the form compilers see from ONNX
    and other frontends. ``causal`` adds a constant upper-triangular -inf mask (GPT).
    """

    def __init__(self, dim: int, heads: int, seq_len: int, causal: bool = False):
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} is not divisible by heads {heads}")
        self.heads = heads
        self.head_dim = dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        if causal:
            mask = torch.full((seq_len, seq_len), float("-inf")).triu(1)
            self.register_buffer("mask", mask, persistent=False)
        else:
            self.mask = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        if self.mask is not None:
            scores = scores + self.mask[:t, :t]
        out = torch.matmul(scores.softmax(dim=-1), v)
        return self.proj(out.transpose(1, 2).reshape(b, t, d))


class FeedForward(nn.Sequential):
    """Linear → GELU → Linear, the MLP of every transformer and mixer block here."""

    def __init__(self, dim: int, hidden: int, approximate: str = "none"):
        super().__init__(nn.Linear(dim, hidden), nn.GELU(approximate=approximate), nn.Linear(hidden, dim))


class PreNormBlock(nn.Module):
    """Pre-LayerNorm transformer block (ViT, GPT-2): x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, dim: int, heads: int, mlp_dim: int, seq_len: int, causal: bool = False, approximate: str = "none"):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, heads, seq_len, causal)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = FeedForward(dim, mlp_dim, approximate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class PostNormBlock(nn.Module):
    """Post-LayerNorm transformer block (original BERT): ln(x + attn(x)), then ln(x + mlp(x))."""

    def __init__(self, dim: int, heads: int, mlp_dim: int, seq_len: int):
        super().__init__()
        self.attn = SelfAttention(dim, heads, seq_len)
        self.ln1 = nn.LayerNorm(dim, eps=1e-12)
        self.mlp = FeedForward(dim, mlp_dim)
        self.ln2 = nn.LayerNorm(dim, eps=1e-12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.mlp(x))


class PatchEmbed(nn.Module):
    """Image → (batch, tokens, dim) by a stride-``patch`` convolution (ViT and Mixer stems)."""

    def __init__(self, patch: int, dim: int, channels: int = 3):
        super().__init__()
        self.conv = nn.Conv2d(channels, dim, patch, stride=patch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x).flatten(2).transpose(1, 2)


# ---- CNNs ------------------------------------------------------------------------------


class BasicBlock(nn.Module):
    """ResNet basic block: two 3x3 convs, identity or 1x1-projection shortcut."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = ConvBNAct(cin, cout, 3, stride, act=nn.ReLU())
        self.conv2 = ConvBNAct(cout, cout, 3)
        self.shortcut = ConvBNAct(cin, cout, 1, stride) if stride != 1 or cin != cout else nn.Identity()
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.conv2(self.conv1(x)) + self.shortcut(x))


class ResNet18(nn.Module):
    """ResNet-18 for 224x224 ImageNet: 7x7 stem, max-pool, 4 stages of 2 basic blocks."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(ConvBNAct(3, 64, 7, 2, act=nn.ReLU()), nn.MaxPool2d(3, 2, padding=1))
        blocks, cin = [], 64
        for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.blocks(self.stem(x)).mean(dim=(2, 3)))


class InvertedResidual(nn.Module):
    """MobileNetV2 block: 1x1 expand (ReLU6) → 3x3 depthwise (ReLU6) → 1x1 linear project."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(ConvBNAct(cin, hidden, 1, act=nn.ReLU6()))
        layers += [ConvBNAct(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6()), ConvBNAct(hidden, cout, 1)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    """MobileNetV2 (width 1.0) for 224x224: the paper's (expand, channels, repeats, stride) table."""

    SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [ConvBNAct(3, 32, 3, 2, act=nn.ReLU6())]
        cin = 32
        for expand, cout, repeats, stride in self.SETTINGS:
            for i in range(repeats):
                layers.append(InvertedResidual(cin, cout, stride if i == 0 else 1, expand))
                cin = cout
        layers.append(ConvBNAct(cin, 1280, 1, act=nn.ReLU6()))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).mean(dim=(2, 3)))


# ---- transformers and mixers -----------------------------------------------------------


class BertEncoder(nn.Module):
    """BERT encoder (word + position + token-type embeddings, post-norm blocks) → hidden states.

    Token types are all zero and there is no padding mask (one full sequence), so the only
    input is ``input_ids``; both constants are buffers, which keeps them out of the inputs.
    """

    def __init__(self, vocab: int, dim: int, layers: int, heads: int, mlp_dim: int, seq_len: int, max_positions: int = 512):
        super().__init__()
        self.word = nn.Embedding(vocab, dim)
        self.position = nn.Embedding(max_positions, dim)
        self.token_type = nn.Embedding(2, dim)
        self.ln = nn.LayerNorm(dim, eps=1e-12)
        self.blocks = nn.Sequential(*[PostNormBlock(dim, heads, mlp_dim, seq_len) for _ in range(layers)])
        self.register_buffer("position_ids", torch.arange(seq_len), persistent=False)
        self.register_buffer("token_type_ids", torch.zeros(seq_len, dtype=torch.long), persistent=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        t = input_ids.shape[1]
        x = self.word(input_ids) + self.position(self.position_ids[:t]) + self.token_type(self.token_type_ids[:t])
        return self.blocks(self.ln(x))


class VisionTransformer(nn.Module):
    """ViT: patch embedding + class token + learned positions, pre-norm blocks, head on the class token."""

    def __init__(self, image: int, patch: int, dim: int, depth: int, heads: int, mlp_dim: int, num_classes: int = 1000):
        super().__init__()
        tokens = (image // patch) ** 2 + 1
        self.embed = PatchEmbed(patch, dim)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, tokens, dim) * 0.02)
        self.blocks = nn.Sequential(*[PreNormBlock(dim, heads, mlp_dim, tokens) for _ in range(depth)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.ln(self.blocks(x))[:, 0])


class MixerBlock(nn.Module):
    """MLP-Mixer block: token-mixing MLP across patches, then channel-mixing MLP, both pre-norm."""

    def __init__(self, tokens: int, dim: int, token_mlp: int, channel_mlp: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.token_mlp = FeedForward(tokens, token_mlp)
        self.ln2 = nn.LayerNorm(dim)
        self.channel_mlp = FeedForward(dim, channel_mlp)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.token_mlp(self.ln1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mlp(self.ln2(x))


class MlpMixer(nn.Module):
    """MLP-Mixer: patch embedding, mixer blocks, global average over tokens, linear head."""

    def __init__(self, image: int, patch: int, dim: int, depth: int, token_mlp: int, channel_mlp: int, num_classes: int = 1000):
        super().__init__()
        tokens = (image // patch) ** 2
        self.embed = PatchEmbed(patch, dim)
        self.blocks = nn.Sequential(*[MixerBlock(tokens, dim, token_mlp, channel_mlp) for _ in range(depth)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.ln(self.blocks(self.embed(x))).mean(dim=1))


class GptDecoder(nn.Module):
    """GPT-2-style decoder: token + learned position embeddings, causal pre-norm blocks
    (tanh-GELU as GPT-2), final LayerNorm → hidden states. No LM head: its vocab-sized matmul
    would dominate the network and is one task, not the decoder blocks we want to study."""

    def __init__(self, vocab: int, dim: int, layers: int, heads: int, seq_len: int):
        super().__init__()
        self.token = nn.Embedding(vocab, dim)
        self.position = nn.Embedding(seq_len, dim)
        self.blocks = nn.Sequential(
            *[PreNormBlock(dim, heads, 4 * dim, seq_len, causal=True, approximate="tanh") for _ in range(layers)]
        )
        self.ln = nn.LayerNorm(dim)
        self.register_buffer("position_ids", torch.arange(seq_len), persistent=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        t = input_ids.shape[1]
        x = self.token(input_ids) + self.position(self.position_ids[:t])
        return self.ln(self.blocks(x))


# ---- factories and registration --------------------------------------------------------


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


def _build(make: Callable[[], nn.Module], make_inputs: Callable[[torch.Generator], tuple[torch.Tensor, ...]], seed: int) -> NetworkDefinition:
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
