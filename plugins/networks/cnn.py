"""The built-in convolutional networks: ResNets, DenseNet, GoogLeNet, SqueezeNet, U-Net and
a DeepLabV3 head.
"""

from __future__ import annotations

import torch
from torch import nn

from tcl_plugins.networks.blocks import ConvBNAct


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
