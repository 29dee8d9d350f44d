"""The ``mamba`` cost model (TCL's): Mamba blocks over the schedule primitive sequence."""

from __future__ import annotations

import torch
from torch import nn

from tcl_plugins.cost_models.mamba_block import Mamba, RMSNorm
from tcl_plugins.cost_models.sequence import SequenceCostModel, SequenceNet, step_encoder
from tcl_plugins.cost_models.torch_model import MCDropout


class MambaResidual(nn.Module):
    """x + dropout(Mamba(RMSNorm(x)))."""

    def __init__(self, d: int, d_state: int, d_conv: int, expand: int, dropout: float):
        super().__init__()
        self.norm = RMSNorm(d)
        self.mixer = Mamba(d, d_state=d_state, d_conv=d_conv, expand=expand)
        self.dropout = MCDropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.dropout(self.mixer(self.norm(x)))


class MambaNet(SequenceNet):
    """TCL: TLP's encoder, ``layers`` residual blocks x + Mamba(RMSNorm(x)) (d_state 16,
    d_conv 4, dt_rank ceil(d/16)), decoder Linear(256,1), summed over steps.

    Defaults one block of expand 1: TLP's depth, and the width at which it trains and predicts
    about as fast as TLP on a CPU; expand 2 (mamba-ssm's default) trains 1.9x slower, and 1.2x
    even with a free scan (docs/cost-models.md)."""

    def __init__(
        self, in_dim: int, layers: int = 1, d_state: int = 16, d_conv: int = 4, expand: int = 1, dropout: float = 0.1
    ):
        super().__init__()
        self.encoder = step_encoder(in_dim)
        self.blocks = nn.ModuleList([MambaResidual(256, d_state, d_conv, expand, dropout) for _ in range(layers)])
        self.decoder = nn.Linear(256, 1)

    def hidden(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.encoder(x)
        for block in self.blocks:
            h = block(h)
        return h


class MambaCostModel(SequenceCostModel):
    """TCL's Mamba model over trace sequences."""

    name = "mamba"
    arch_defaults = {"layers": 1, "d_state": 16, "d_conv": 4, "expand": 1}  # see MambaNet

    def _build(self, in_dim: int) -> nn.Module:
        a = self.arch
        return MambaNet(
            in_dim,
            layers=a["layers"],
            d_state=a["d_state"],
            d_conv=a["d_conv"],
            expand=a["expand"],
            dropout=self.dropout,
        )
