"""The ``mlp`` cost model (Tenset-MLP): per-store features through an MLP, summed over stores."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from tcl.api.errors import TclError
from tcl.learning.training import Group
from tcl_plugins.cost_models.features import PackedStores
from tcl_plugins.cost_models.torch_model import ResidualLinear, TorchCostModel


class MLPNet(nn.Module):
    """Tenset-MLP: per-store Linear(F,256)+ReLU, Linear(256,256)+ReLU, sum over the stores of
    each program, two residual Linear(256)+ReLU blocks, Linear(256,1).

    As TenSet's MLP does, inputs are divided per dimension by the largest magnitude seen in
    the training data (buffer ``feature_scale``, saved with the weights)."""

    def __init__(self, in_dim: int, hidden: int = 256, dropout: float = 0.1):
        super().__init__()
        self.hidden_dim = hidden
        self.register_buffer("feature_scale", torch.ones(in_dim))
        self.encoder = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.blocks = nn.ModuleList([ResidualLinear(hidden, dropout) for _ in range(2)])
        self.decoder = nn.Linear(hidden, 1)

    def embed(self, inputs: tuple[torch.Tensor, torch.Tensor, int]) -> torch.Tensor:
        x, seg, n = inputs
        h = self.encoder(x / self.feature_scale)
        pooled = h.new_zeros(n, self.hidden_dim).index_add_(0, seg, h)
        for block in self.blocks:
            pooled = block(pooled)
        return pooled

    def score_with(self, inputs: tuple[torch.Tensor, torch.Tensor, int], decoder: Any) -> torch.Tensor:
        """Scores with another output layer (``decoder(hidden) -> (..., 1)``), for multi-head training."""
        return decoder(self.embed(inputs)).squeeze(-1)

    def forward(self, inputs: tuple[torch.Tensor, torch.Tensor, int]) -> torch.Tensor:
        return self.score_with(inputs, self.decoder)


class MLPCostModel(TorchCostModel):
    """Tenset-MLP over per-store features."""

    name = "mlp"
    default_featurizer = "per-store"
    arch_defaults = {"hidden": 256}

    def _build(self, in_dim: int) -> nn.Module:
        return MLPNet(in_dim, hidden=self.arch["hidden"], dropout=self.dropout)

    def _init_from_data(self, module: nn.Module, groups: Sequence[Group]) -> None:
        scale = np.zeros(module.feature_scale.shape[0], dtype=np.float64)
        for g in groups:
            if g.features.data.size:
                scale = np.maximum(scale, np.abs(g.features.data).max(0))
        scale[~(scale > 0)] = 1.0
        module.feature_scale.copy_(torch.from_numpy(scale.astype(np.float32)))

    def _embed_dim(self) -> int:
        return int(self.arch["hidden"])

    def _prepare(self, features: Any) -> PackedStores:
        return features if isinstance(features, PackedStores) else PackedStores(list(features), self.in_dim)

    def _in_dim_of(self, prepared: PackedStores) -> int:
        if not prepared.dim:
            raise TclError(f"featurizer {self.featurizer.name} gave no store features for the first task")
        return prepared.dim

    def collate(self, parts, device):
        xs, segs, offset = [], [], 0
        for packed, idx in parts:
            x, seg = packed.gather(idx)
            xs.append(x)
            segs.append(seg + offset)
            offset += idx.size
        x = torch.from_numpy(np.concatenate(xs, axis=0)).to(device)
        seg = torch.from_numpy(np.concatenate(segs)).to(device)
        return x, seg, offset
