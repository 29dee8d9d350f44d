"""Built-in network suite: 23 inference networks and operator families, pure torch (docs/networks.md).

torchvision and transformers are not dependencies (and torchvision does not load here), so
each network is written out below at the widths of its well-known reference configuration.
That matters more than the weights: tuning tasks are defined by operator shapes, so
ResNet-18 written here yields the same convolution workloads as anyone's ResNet-18. The
weights are random (fixed seed) because task extraction and tuning never look at them.

Every factory returns a :class:`tcl.api.interfaces.NetworkDefinition` holding a module in eval
mode and its example inputs (batch 1 unless asked otherwise; the ``-b8`` networks default to 8). Factories accept ``seed`` and
``batch_size`` keyword options, which a suite config may set.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from tcl.api.interfaces import NetworkDefinition

# ---- shared building blocks ------------------------------------------------------------


class ConvBNAct(nn.Sequential):
    """Conv2d (no bias) + BatchNorm + optional activation: the unit of both CNNs.

    The conv has no bias because BatchNorm follows; task extraction folds the BatchNorm into
    the conv, giving the conv+bias(+act) tasks of a real compiled CNN.
    """

    def __init__(
        self,
        cin: int,
        cout: int,
        kernel: int,
        stride: int = 1,
        groups: int = 1,
        act: nn.Module | None = None,
        dilation: int = 1,
    ):
        layers: list[nn.Module] = [
            nn.Conv2d(
                cin,
                cout,
                kernel,
                stride,
                padding=dilation * (kernel // 2),
                dilation=dilation,
                groups=groups,
                bias=False,
            ),
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

    def __init__(
        self, dim: int, heads: int, mlp_dim: int, seq_len: int, causal: bool = False, approximate: str = "none"
    ):
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

    SETTINGS = [
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    ]

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


class Bottleneck(nn.Module):
    """ResNet-50 / ResNeXt bottleneck (torchvision's v1.5: the stride on the 3x3):
    1x1 reduce → 3x3 (grouped for ResNeXt, dilated in DeepLab's last stage) → 1x1 expand x4."""

    def __init__(
        self, cin: int, planes: int, stride: int, groups: int = 1, width_per_group: int = 64, dilation: int = 1
    ):
        super().__init__()
        width = planes * width_per_group // 64 * groups
        cout = planes * 4
        self.body = nn.Sequential(
            ConvBNAct(cin, width, 1, act=nn.ReLU()),
            ConvBNAct(width, width, 3, stride, groups=groups, act=nn.ReLU(), dilation=dilation),
            ConvBNAct(width, cout, 1),
        )
        self.shortcut = ConvBNAct(cin, cout, 1, stride) if stride != 1 or cin != cout else nn.Identity()
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.body(x) + self.shortcut(x))


class ResNet50(nn.Module):
    """ResNet-50 (``groups=1``) or ResNeXt-50 32x4d (``groups=32, width_per_group=4``), 224x224."""

    def __init__(self, groups: int = 1, width_per_group: int = 64, num_classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(ConvBNAct(3, 64, 7, 2, act=nn.ReLU()), nn.MaxPool2d(3, 2, padding=1))
        blocks, cin = [], 64
        for planes, repeats, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
            for i in range(repeats):
                blocks.append(Bottleneck(cin, planes, stride if i == 0 else 1, groups, width_per_group))
                cin = planes * 4
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(2048, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.blocks(self.stem(x)).mean(dim=(2, 3)))


class SqueezeExcite(nn.Module):
    """Squeeze-and-excitation: global mean → 1x1 conv → act → 1x1 conv → gate, times the input."""

    def __init__(self, channels: int, squeeze: int, act: nn.Module, gate: nn.Module):
        super().__init__()
        self.reduce = nn.Conv2d(channels, squeeze, 1)
        self.act = act
        self.expand = nn.Conv2d(squeeze, channels, 1)
        self.gate = gate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = x.mean(dim=(2, 3), keepdim=True)
        return x * self.gate(self.expand(self.act(self.reduce(s))))


def _divisible(value: float, divisor: int = 8) -> int:
    """Round channels as the MobileNet papers do: to a multiple of 8, never 10% below ``value``."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


class MBConv(nn.Module):
    """Mobile inverted bottleneck with optional squeeze-excitation (MobileNetV3, EfficientNet):
    1x1 expand → kxk depthwise → [SE] → 1x1 project, residual when shapes allow."""

    def __init__(
        self,
        cin: int,
        hidden: int,
        cout: int,
        kernel: int,
        stride: int,
        act: Callable[[], nn.Module],
        se: SqueezeExcite | None,
    ):
        super().__init__()
        layers: list[nn.Module] = []
        if hidden != cin:
            layers.append(ConvBNAct(cin, hidden, 1, act=act()))
        layers.append(ConvBNAct(hidden, hidden, kernel, stride, groups=hidden, act=act()))
        if se is not None:
            layers.append(se)
        layers.append(ConvBNAct(hidden, cout, 1))
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV3Large(nn.Module):
    """MobileNetV3-Large for 224x224: the paper's table (kernel, expansion, out, SE, hard-swish, stride)."""

    SETTINGS = [
        (3, 16, 16, False, False, 1),
        (3, 64, 24, False, False, 2),
        (3, 72, 24, False, False, 1),
        (5, 72, 40, True, False, 2),
        (5, 120, 40, True, False, 1),
        (5, 120, 40, True, False, 1),
        (3, 240, 80, False, True, 2),
        (3, 200, 80, False, True, 1),
        (3, 184, 80, False, True, 1),
        (3, 184, 80, False, True, 1),
        (3, 480, 112, True, True, 1),
        (3, 672, 112, True, True, 1),
        (5, 672, 160, True, True, 2),
        (5, 960, 160, True, True, 1),
        (5, 960, 160, True, True, 1),
    ]

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [ConvBNAct(3, 16, 3, 2, act=nn.Hardswish())]
        cin = 16
        for kernel, hidden, cout, use_se, hswish, stride in self.SETTINGS:
            act = nn.Hardswish if hswish else nn.ReLU
            se = SqueezeExcite(hidden, _divisible(hidden / 4), nn.ReLU(), nn.Hardsigmoid()) if use_se else None
            layers.append(MBConv(cin, hidden, cout, kernel, stride, act, se))
            cin = cout
        layers.append(ConvBNAct(cin, 960, 1, act=nn.Hardswish()))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(960, 1280), nn.Hardswish(), nn.Linear(1280, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).mean(dim=(2, 3)))


class EfficientNetB0(nn.Module):
    """EfficientNet-B0 for 224x224: (expansion, kernel, stride, out, repeats) stages, SiLU, SE 0.25."""

    STAGES = [
        (1, 3, 1, 16, 1),
        (6, 3, 2, 24, 2),
        (6, 5, 2, 40, 2),
        (6, 3, 2, 80, 3),
        (6, 5, 1, 112, 3),
        (6, 5, 2, 192, 4),
        (6, 3, 1, 320, 1),
    ]

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [ConvBNAct(3, 32, 3, 2, act=nn.SiLU())]
        cin = 32
        for expand, kernel, stride, cout, repeats in self.STAGES:
            for i in range(repeats):
                hidden = cin * expand
                se = SqueezeExcite(hidden, max(1, cin // 4), nn.SiLU(), nn.Sigmoid())
                layers.append(MBConv(cin, hidden, cout, kernel, stride if i == 0 else 1, nn.SiLU, se))
                cin = cout
        layers.append(ConvBNAct(cin, 1280, 1, act=nn.SiLU()))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).mean(dim=(2, 3)))


class DenseLayer(nn.Module):
    """DenseNet layer: BN-ReLU-1x1 conv (4 x growth) → BN-ReLU-3x3 conv (growth), concatenated
    onto its input: every layer of a block sees a different channel count."""

    def __init__(self, cin: int, growth: int, bn_size: int = 4):
        super().__init__()
        self.pre = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU())
        self.conv1 = ConvBNAct(cin, bn_size * growth, 1, act=nn.ReLU())
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.conv2(self.conv1(self.pre(x)))], dim=1)


class DenseNet121(nn.Module):
    """DenseNet-121 for 224x224: growth 32, blocks of 6/12/24/16 layers, halving transitions."""

    def __init__(self, growth: int = 32, blocks: tuple[int, ...] = (6, 12, 24, 16), num_classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [ConvBNAct(3, 64, 7, 2, act=nn.ReLU()), nn.MaxPool2d(3, 2, padding=1)]
        channels = 64
        for i, repeats in enumerate(blocks):
            for _ in range(repeats):
                layers.append(DenseLayer(channels, growth))
                channels += growth
            if i + 1 < len(blocks):
                layers += [
                    nn.BatchNorm2d(channels),
                    nn.ReLU(),
                    nn.Conv2d(channels, channels // 2, 1, bias=False),
                    nn.AvgPool2d(2, 2),
                ]
                channels //= 2
        layers += [nn.BatchNorm2d(channels), nn.ReLU()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).mean(dim=(2, 3)))


class Fire(nn.Module):
    """SqueezeNet fire module: 1x1 squeeze, then 1x1 and 3x3 expands concatenated (biased convs, no BN)."""

    def __init__(self, cin: int, squeeze: int, expand1: int, expand3: int):
        super().__init__()
        self.squeeze = nn.Sequential(nn.Conv2d(cin, squeeze, 1), nn.ReLU())
        self.expand1 = nn.Sequential(nn.Conv2d(squeeze, expand1, 1), nn.ReLU())
        self.expand3 = nn.Sequential(nn.Conv2d(squeeze, expand3, 3, padding=1), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.squeeze(x)
        return torch.cat([self.expand1(s), self.expand3(s)], dim=1)


class SqueezeNet11(nn.Module):
    """SqueezeNet 1.1 for 224x224: fire modules, ceil-mode max-pools, a 1x1-conv classifier."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        pool = lambda: nn.MaxPool2d(3, 2, ceil_mode=True)  # noqa: E731
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, 2),
            nn.ReLU(),
            pool(),
            Fire(64, 16, 64, 64),
            Fire(128, 16, 64, 64),
            pool(),
            Fire(128, 32, 128, 128),
            Fire(256, 32, 128, 128),
            pool(),
            Fire(256, 48, 192, 192),
            Fire(384, 48, 192, 192),
            Fire(384, 64, 256, 256),
            Fire(512, 64, 256, 256),
        )
        self.classifier = nn.Sequential(nn.Conv2d(512, num_classes, 1), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x)).mean(dim=(2, 3))


class InceptionBlock(nn.Module):
    """GoogLeNet inception module: 1x1 | 1x1→3x3 | 1x1→5x5 | 3x3 max-pool→1x1, concatenated."""

    def __init__(self, cin: int, c1: int, c3r: int, c3: int, c5r: int, c5: int, pool: int):
        super().__init__()
        relu = nn.ReLU
        self.b1 = ConvBNAct(cin, c1, 1, act=relu())
        self.b3 = nn.Sequential(ConvBNAct(cin, c3r, 1, act=relu()), ConvBNAct(c3r, c3, 3, act=relu()))
        self.b5 = nn.Sequential(ConvBNAct(cin, c5r, 1, act=relu()), ConvBNAct(c5r, c5, 5, act=relu()))
        self.bp = nn.Sequential(nn.MaxPool2d(3, 1, padding=1), ConvBNAct(cin, pool, 1, act=relu()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(x)], dim=1)


class GoogLeNet(nn.Module):
    """GoogLeNet (Inception v1, with BatchNorm) for 224x224: the paper's nine inception modules."""

    MODULES = {
        "3a": (192, 64, 96, 128, 16, 32, 32),
        "3b": (256, 128, 128, 192, 32, 96, 64),
        "4a": (480, 192, 96, 208, 16, 48, 64),
        "4b": (512, 160, 112, 224, 24, 64, 64),
        "4c": (512, 128, 128, 256, 24, 64, 64),
        "4d": (512, 112, 144, 288, 32, 64, 64),
        "4e": (528, 256, 160, 320, 32, 128, 128),
        "5a": (832, 256, 160, 320, 32, 128, 128),
        "5b": (832, 384, 192, 384, 48, 128, 128),
    }

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        pool = lambda: nn.MaxPool2d(3, 2, padding=1)  # noqa: E731
        m = {k: InceptionBlock(*v) for k, v in self.MODULES.items()}
        self.features = nn.Sequential(
            ConvBNAct(3, 64, 7, 2, act=nn.ReLU()),
            pool(),
            ConvBNAct(64, 64, 1, act=nn.ReLU()),
            ConvBNAct(64, 192, 3, act=nn.ReLU()),
            pool(),
            m["3a"],
            m["3b"],
            pool(),
            m["4a"],
            m["4b"],
            m["4c"],
            m["4d"],
            m["4e"],
            pool(),
            m["5a"],
            m["5b"],
        )
        self.fc = nn.Linear(1024, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x).mean(dim=(2, 3)))


class ShuffleUnit(nn.Module):
    """ShuffleNetV2 unit: split channels (stride 1) or not (stride 2), 1x1 → 3x3 depthwise → 1x1
    on one branch, concatenate, then shuffle the channels of the two halves."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        half = cout // 2
        self.stride = stride
        if stride == 2:
            self.left = nn.Sequential(ConvBNAct(cin, cin, 3, 2, groups=cin), ConvBNAct(cin, half, 1, act=nn.ReLU()))
        branch_in = cin if stride == 2 else half
        self.right = nn.Sequential(
            ConvBNAct(branch_in, half, 1, act=nn.ReLU()),
            ConvBNAct(half, half, 3, stride, groups=half),
            ConvBNAct(half, half, 1, act=nn.ReLU()),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1:
            a, b = x.chunk(2, dim=1)
            out = torch.cat([a, self.right(b)], dim=1)
        else:
            out = torch.cat([self.left(x), self.right(x)], dim=1)
        n, c, h, w = out.shape
        return out.reshape(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)


class ShuffleNetV2(nn.Module):
    """ShuffleNetV2 1.0x for 224x224: stages of 4/8/4 units at 116/232/464 channels."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = [ConvBNAct(3, 24, 3, 2, act=nn.ReLU()), nn.MaxPool2d(3, 2, padding=1)]
        cin = 24
        for cout, repeats in [(116, 4), (232, 8), (464, 4)]:
            for i in range(repeats):
                layers.append(ShuffleUnit(cin, cout, 2 if i == 0 else 1))
                cin = cout
        layers.append(ConvBNAct(cin, 1024, 1, act=nn.ReLU()))
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(1024, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x).mean(dim=(2, 3)))


class DoubleConv(nn.Sequential):
    """U-Net's unit: two 3x3 conv-BN-ReLU."""

    def __init__(self, cin: int, cout: int):
        super().__init__(ConvBNAct(cin, cout, 3, act=nn.ReLU()), ConvBNAct(cout, cout, 3, act=nn.ReLU()))


class UNet(nn.Module):
    """U-Net (widths 64-1024, padded convs): max-pool down, 2x2 stride-2 transposed-conv up,
    skip connections concatenated, 1x1 conv to the class map."""

    def __init__(self, channels: int = 3, classes: int = 2, widths: tuple[int, ...] = (64, 128, 256, 512, 1024)):
        super().__init__()
        self.down = nn.ModuleList([DoubleConv(channels, widths[0])])
        self.down.extend(DoubleConv(a, b) for a, b in zip(widths, widths[1:]))
        self.up = nn.ModuleList(nn.ConvTranspose2d(b, a, 2, stride=2) for a, b in zip(widths, widths[1:]))
        self.merge = nn.ModuleList(DoubleConv(2 * a, a) for a in widths[:-1])
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Conv2d(widths[0], classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for i, block in enumerate(self.down):
            x = block(x if i == 0 else self.pool(x))
            skips.append(x)
        x = skips.pop()
        for up, merge in zip(reversed(self.up), reversed(self.merge)):
            x = merge(torch.cat([skips.pop(), up(x)], dim=1))
        return self.head(x)


class AsppPooling(nn.Module):
    """DeepLab's image-level branch: global mean → 1x1 conv-BN-ReLU → bilinear upsampling back."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = ConvBNAct(cin, cout, 1, act=nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x.mean(dim=(2, 3), keepdim=True))
        return nn.functional.interpolate(y, size=x.shape[-2:], mode="bilinear", align_corners=False)


class DeepLabV3Head(nn.Module):
    """DeepLabV3 at output stride 16 on a 513x513 image: ResNet-50's last stage with dilation 2
    on the 33x33 stage-3 features, then ASPP (1x1, 3x3 at rates 6/12/18, image pooling),
    a 1x1 merge, a 3x3 conv and the 21-class (VOC) 1x1 classifier."""

    def __init__(self, classes: int = 21, rates: tuple[int, ...] = (6, 12, 18)):
        super().__init__()
        self.stage4 = nn.Sequential(
            Bottleneck(1024, 512, 1, dilation=2),
            Bottleneck(2048, 512, 1, dilation=2),
            Bottleneck(2048, 512, 1, dilation=2),
        )
        branches: list[nn.Module] = [ConvBNAct(2048, 256, 1, act=nn.ReLU())]
        branches += [ConvBNAct(2048, 256, 3, act=nn.ReLU(), dilation=r) for r in rates]
        branches.append(AsppPooling(2048, 256))
        self.branches = nn.ModuleList(branches)
        self.project = ConvBNAct(256 * len(branches), 256, 1, act=nn.ReLU())
        self.head = nn.Sequential(ConvBNAct(256, 256, 3, act=nn.ReLU()), nn.Conv2d(256, classes, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stage4(x)
        return self.head(self.project(torch.cat([b(x) for b in self.branches], dim=1)))


# ---- transformers and mixers -----------------------------------------------------------


class BertEncoder(nn.Module):
    """BERT encoder (word + position + token-type embeddings, post-norm blocks) → hidden states.

    Token types are all zero and there is no padding mask (one full sequence), so the only
    input is ``input_ids``; both constants are buffers, which keeps them out of the inputs.
    """

    def __init__(
        self, vocab: int, dim: int, layers: int, heads: int, mlp_dim: int, seq_len: int, max_positions: int = 512
    ):
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

    def __init__(
        self, image: int, patch: int, dim: int, depth: int, token_mlp: int, channel_mlp: int, num_classes: int = 1000
    ):
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


class RMSNorm(nn.Module):
    """Root-mean-square norm (Llama): x / sqrt(mean(x²) + eps) · weight, no centring, no bias."""

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


class LlamaAttention(nn.Module):
    """Causal attention with rotary positions and grouped-query heads (``kv_heads`` < ``heads``)."""

    def __init__(self, dim: int, heads: int, kv_heads: int, seq_len: int, theta: float = 10000.0):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.q = nn.Linear(dim, dim, bias=False)
        self.k = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.v = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        inv_freq = 1.0 / theta ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim)
        angles = torch.outer(torch.arange(seq_len).float(), inv_freq)
        angles = torch.cat([angles, angles], dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        self.register_buffer("mask", torch.full((seq_len, seq_len), float("-inf")).triu(1), persistent=False)

    def _rotate(self, x: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * self.cos + rotated * self.sin

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q = self._rotate(self.q(x).reshape(b, t, self.heads, self.head_dim).transpose(1, 2))
        k = self._rotate(self.k(x).reshape(b, t, self.kv_heads, self.head_dim).transpose(1, 2))
        v = self.v(x).reshape(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        repeat = self.heads // self.kv_heads
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim)) + self.mask
        out = torch.matmul(scores.softmax(dim=-1), v)
        return self.o(out.transpose(1, 2).reshape(b, t, d))


class GatedMlp(nn.Module):
    """Llama's SwiGLU MLP: down(silu(gate(x)) · up(x))."""

    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(nn.functional.silu(self.gate(x)) * self.up(x))


class LlamaBlock(nn.Module):
    """A Llama decoder layer on hidden states: x + attn(rms(x)), x + mlp(rms(x)), then the final
    RMSNorm. No embedding table or LM head (their vocab-sized tables are 500 MB of constants)."""

    def __init__(self, dim: int, heads: int, kv_heads: int, hidden: int, seq_len: int):
        super().__init__()
        self.norm1 = RMSNorm(dim)
        self.attn = LlamaAttention(dim, heads, kv_heads, seq_len)
        self.norm2 = RMSNorm(dim)
        self.mlp = GatedMlp(dim, hidden)
        self.norm = RMSNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return self.norm(x + self.mlp(self.norm2(x)))


class Wav2Vec2Encoder(nn.Module):
    """wav2vec 2.0 base on one second of 16 kHz audio: the seven-layer conv1d feature encoder
    (512 channels, kernels 10/3/3/3/3/2/2, strides 5/2/2/2/2/2/2, GroupNorm after the first,
    GELU), feature projection to 768, the grouped conv1d position embedding (kernel 128,
    16 groups) and one post-norm transformer layer."""

    def __init__(self, dim: int = 768, channels: int = 512, heads: int = 12, mlp_dim: int = 3072, frames: int = 49):
        super().__init__()
        convs: list[nn.Module] = []
        cin = 1
        for i, (kernel, stride) in enumerate([(10, 5), (3, 2), (3, 2), (3, 2), (3, 2), (2, 2), (2, 2)]):
            convs.append(nn.Conv1d(cin, channels, kernel, stride, bias=False))
            if i == 0:
                convs.append(nn.GroupNorm(channels, channels))
            convs.append(nn.GELU())
            cin = channels
        self.features = nn.Sequential(*convs)
        self.ln = nn.LayerNorm(channels)
        self.project = nn.Linear(channels, dim)
        self.position = nn.Conv1d(dim, dim, 128, padding=64, groups=16)
        self.ln_pos = nn.LayerNorm(dim)
        self.block = PostNormBlock(dim, heads, mlp_dim, frames)

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        x = self.project(self.ln(self.features(audio).transpose(1, 2)))
        pos = nn.functional.gelu(self.position(x.transpose(1, 2))[..., :-1]).transpose(1, 2)
        return self.block(self.ln_pos(x + pos))


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
