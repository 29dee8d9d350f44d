"""The built-in transformer and MLP networks: BERT, ViT, MLP-Mixer, a GPT decoder, a Llama block
and a wav2vec2 encoder.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from tcl_plugins.networks.blocks import FeedForward, PatchEmbed, PostNormBlock, PreNormBlock


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
