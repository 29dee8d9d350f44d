"""Building blocks several built-in networks share: conv-BN-activation, self-attention,
feed-forward and transformer blocks, patch embedding, squeeze-excite.
"""

from __future__ import annotations

import math

import torch
from torch import nn


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


def divisible(value: float, divisor: int = 8) -> int:
    """Round channels as the MobileNet papers do: to a multiple of 8, never 10% below ``value``."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded
