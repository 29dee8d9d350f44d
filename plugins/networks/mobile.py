"""The built-in mobile convolutional networks: MobileNetV2 and V3, EfficientNet-B0, ShuffleNetV2."""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from tcl_plugins.networks.blocks import ConvBNAct, SqueezeExcite, divisible


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
            se = SqueezeExcite(hidden, divisible(hidden / 4), nn.ReLU(), nn.Hardsigmoid()) if use_se else None
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
