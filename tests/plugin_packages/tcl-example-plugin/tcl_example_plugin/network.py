"""A network: a torch module whose operators become tuning tasks."""

from __future__ import annotations

from tcl.api.interfaces import NetworkDefinition


def tiny_convnet() -> NetworkDefinition:
    """Two 3x3 convolutions and a classifier on a 32x32 image."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    module = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 16, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    ).eval()
    return NetworkDefinition(module=module, example_inputs=(torch.randn(1, 3, 32, 32),))
