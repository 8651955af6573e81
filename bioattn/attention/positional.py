"""Positional encodings added to token embeddings ``x: (B, L, D)``."""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from bioattn.attention.inputs import BATCH_FIRST_HINT

__all__ = ["SinusoidalPositionalEncoding", "LearnedPositionalEncoding"]


def _check_length(x: Tensor, max_len: int, embed_dim: int) -> None:
    if x.dim() != 3 or x.size(-1) != embed_dim:
        raise ValueError(f"expected x of shape (B, L, {embed_dim}), got {tuple(x.shape)} ({BATCH_FIRST_HINT})")
    if not x.is_floating_point():
        raise ValueError(f"expected float embeddings x (B, L, {embed_dim}), got {x.dtype}: embed token ids first (e.g. nn.Embedding)")
    if x.size(1) > max_len:
        raise ValueError(f"sequence length {x.size(1)} exceeds max_len={max_len} of the positional encoding")


class SinusoidalPositionalEncoding(nn.Module):
    """Fixed sin/cos encoding: ``pe[p, 2i] = sin(p / base^(2i/D))``, ``pe[p, 2i+1] = cos(...)``; ``embed_dim`` D
    even, ``max_len`` the longest sequence accepted. :meth:`encode` takes arbitrary positions."""

    def __init__(self, embed_dim: int, max_len: int = 10000, base: float = 10000.0) -> None:
        super().__init__()
        if embed_dim <= 0 or embed_dim % 2:
            raise ValueError(f"embed_dim must be a positive even number, got {embed_dim}")
        self.embed_dim, self.max_len = embed_dim, max_len
        inv_freq = torch.exp(torch.arange(0, embed_dim, 2, dtype=torch.float32) * (-math.log(base) / embed_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.register_buffer("pe", self.encode(torch.arange(max_len)), persistent=False)

    def encode(self, positions: Tensor) -> Tensor:
        """``positions: (...)`` → encodings ``(..., embed_dim)`` (sin in even, cos in odd channels)."""
        angles = positions.to(self.inv_freq.dtype).unsqueeze(-1) * self.inv_freq
        return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)

    def forward(self, x: Tensor) -> Tensor:
        """``x: (B, L, D)`` → ``x + pe[:L]``."""
        _check_length(x, self.max_len, self.embed_dim)
        return x + self.pe[: x.size(1)].to(x.dtype)


class LearnedPositionalEncoding(nn.Module):
    """A trained embedding per position ``0..max_len-1`` of width ``embed_dim``, initialised N(0, 0.02²)."""

    def __init__(self, max_len: int, embed_dim: int) -> None:
        super().__init__()
        self.max_len, self.embed_dim = max_len, embed_dim
        self.embedding = nn.Embedding(max_len, embed_dim)
        nn.init.normal_(self.embedding.weight, std=0.02)

    def forward(self, x: Tensor) -> Tensor:
        """``x: (B, L, D)`` → ``x + embedding[:L]``."""
        _check_length(x, self.max_len, self.embed_dim)
        return x + self.embedding.weight[: x.size(1)].to(x.dtype)
