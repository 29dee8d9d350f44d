"""The ``tlp`` cost model (TLP): self-attention over the schedule primitive sequence."""

from __future__ import annotations

import torch
from torch import nn

from tcl_plugins.cost_models.sequence import SequenceCostModel, SequenceNet, step_encoder
from tcl_plugins.cost_models.torch_model import ResidualLinear


class TLPNet(SequenceNet):
    """TLP: encoder F->64->128->256->256 (ReLU), 8-head self-attention with a residual, two
    residual Linear(256) blocks, decoder Linear(256,1), summed over steps."""

    def __init__(self, in_dim: int, heads: int = 8, dropout: float = 0.1):
        super().__init__()
        self.encoder = step_encoder(in_dim)
        self.attention = nn.MultiheadAttention(256, heads, batch_first=True)
        self.blocks = nn.ModuleList([ResidualLinear(256, dropout) for _ in range(2)])
        self.decoder = nn.Linear(256, 1)

    def hidden(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.encoder(x)
        a, _ = self.attention(h, h, h, key_padding_mask=~mask, need_weights=False)
        h = h + a
        for block in self.blocks:
            h = block(h)
        return h


class TLPCostModel(SequenceCostModel):
    """TLP over trace sequences."""

    name = "tlp"
    arch_defaults = {"heads": 8}

    def _build(self, in_dim: int) -> nn.Module:
        return TLPNet(in_dim, heads=self.arch["heads"], dropout=self.dropout)
