"""What the sequence cost models (``tlp``, ``mamba``) share: the step encoder, the padding mask
and the pooled decoder over the schedule primitive sequence.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from tcl_plugins.cost_models.features import as_sequence
from tcl_plugins.cost_models.torch_model import TorchCostModel


def step_encoder(in_dim: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(in_dim, 64),
        nn.ReLU(),
        nn.Linear(64, 128),
        nn.ReLU(),
        nn.Linear(128, 256),
        nn.ReLU(),
        nn.Linear(256, 256),
        nn.ReLU(),
    )


def step_mask(x: torch.Tensor) -> torch.Tensor:
    """True for real steps (any non-zero feature); padding rows are all zeros. A program
    with no real step keeps its first step so attention and pooling stay defined."""
    mask = x.abs().sum(-1) > 0
    empty = ~mask.any(1)
    if bool(empty.any()):
        mask[empty, 0] = True
    return mask


class SequenceNet(nn.Module):
    """Shared by TLP and Mamba: per-step hidden states -> decoder -> sum over real steps."""

    def hidden(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:  # (n, L, 256)
        raise NotImplementedError

    def score_with(self, x: torch.Tensor, decoder: Any) -> torch.Tensor:
        """Scores with another output layer (``decoder(hidden) -> (..., 1)``), for multi-head training."""
        mask = step_mask(x)
        h = self.hidden(x, mask)
        return (decoder(h).squeeze(-1) * mask).sum(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.score_with(x, self.decoder)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        mask = step_mask(x)
        h = self.hidden(x, mask) * mask.unsqueeze(-1)
        return h.sum(1) / mask.sum(1, keepdim=True)


class SequenceCostModel(TorchCostModel):
    default_featurizer = "trace-seq"

    def _prepare(self, features: Any) -> np.ndarray:
        return as_sequence(features, self.in_dim)

    def _in_dim_of(self, prepared: np.ndarray) -> int:
        return int(prepared.shape[2])

    def collate(self, parts, device):
        x = np.concatenate([f[idx] for f, idx in parts], axis=0) if len(parts) > 1 else parts[0][0][parts[0][1]]
        return torch.from_numpy(np.ascontiguousarray(x)).to(device)
