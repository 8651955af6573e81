"""Axial attention over a multiple sequence alignment ``x: (B, N, L, D)`` (batch, sequences, positions, channels).

Full attention over the N·L cells costs O((NL)²). Axial attention attends along each row (the L positions of
one sequence) and along each column (the N sequences at one position): O(NL(N+L)) — what made attention
usable on MSAs (MSA Transformer, AlphaFold's Evoformer).

- :class:`RowAttention`: attention within each sequence; ``tied=True`` shares one L×L map per head across the
  rows of an alignment (scores summed over the non-padded rows and scaled by ``1/sqrt(d·N)`` as in MSA
  Transformer) — the map that turns into contacts.
- :class:`ColumnAttention`: attention within each column, across sequences (its N×N maps are never returned).
- :class:`AxialTransformerLayer`: row attention, column attention, feed-forward, each pre-norm + residual.

All run through :func:`~bioattn.attention.scaled_dot_product_attention`, so the fused kernels are used unless
weights are requested. Tied row attention is one fused call: summing ``q_r·k_r`` over rows equals one dot
product of the row-concatenated vectors, so ``q, k, v`` are laid out as ``(B, H, L, N·d)``.

Masks (True = padding, the :class:`torch.nn.MultiheadAttention` convention): ``sequence_padding_mask (B, N)``
for padded sequences, ``position_padding_mask (B, L)`` for padded positions. Padded cells never influence real
ones, and their outputs are zero.

``chunk_size`` bounds memory for deep alignments: rows (row attention, feed-forward) or columns (column
attention) are processed ``chunk_size`` at a time, exactly (the tied map is accumulated over row chunks before
its softmax). Under autograd each chunk is checkpointed, so training memory is bounded too.
"""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from bioattn.attention.encoder import FeedForward
from bioattn.attention.sdpa import scaled_dot_product_attention

__all__ = ["RowAttention", "ColumnAttention", "AxialTransformerLayer"]


def _check_input(x: Tensor, embed_dim: int, sequence_padding_mask: Tensor | None, position_padding_mask: Tensor | None) -> None:
    if x.dim() != 4 or x.size(-1) != embed_dim:
        raise ValueError(f"expected x of shape (B, N, L, {embed_dim}), got {tuple(x.shape)}")
    b, n, length, _ = x.shape
    for name, mask, shape in (("sequence_padding_mask", sequence_padding_mask, (b, n)), ("position_padding_mask", position_padding_mask, (b, length))):
        if mask is not None and (mask.dtype != torch.bool or tuple(mask.shape) != shape):
            raise ValueError(f"{name} must be a bool tensor of shape {shape} (True = padding), got {mask.dtype} {tuple(mask.shape)}")


def _over_chunks(fn: Callable[[slice], Tensor], size: int, chunk_size: int | None, dim: int) -> Tensor:
    """``cat([fn(s) for s in chunks of range(size)], dim)``; each chunk checkpointed when autograd records."""
    if chunk_size is None or chunk_size >= size:
        return fn(slice(None))
    pieces = []
    for start in range(0, size, chunk_size):
        part = slice(start, start + chunk_size)
        pieces.append(checkpoint(fn, part, use_reentrant=False) if torch.is_grad_enabled() else fn(part))
    return torch.cat(pieces, dim=dim)


def _attend(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
    """Attention on ``(*lead, H, S, d)`` inputs, flattened to 4-D so torch's fused kernels apply.

    ``mask``: bool keep-mask broadcastable to ``(*lead, H, S, S)``. Returns ``(out (*lead, H, S, d), weights or None)``.
    """
    lead = q.shape[:-3]
    flat = [t.reshape(-1, *t.shape[-3:]) for t in (q, k, v)]
    if mask is not None:
        mask = mask.expand(*lead, *mask.shape[-3:]).reshape(-1, *mask.shape[-3:])
    out, weights = scaled_dot_product_attention(*flat, mask, dropout_p=dropout_p, need_weights=need_weights)
    return out.view(q.shape), (None if weights is None else weights.view(*lead, *weights.shape[-3:]))


def _cell_keep(b: int, n: int, length: int, sequence_padding_mask: Tensor | None, position_padding_mask: Tensor | None, device) -> Tensor | None:
    """Bool ``(B, N, L, 1)``: True on real cells; None when nothing is padded."""
    if sequence_padding_mask is None and position_padding_mask is None:
        return None
    keep = torch.ones(b, n, length, dtype=torch.bool, device=device)
    if sequence_padding_mask is not None:
        keep = keep & ~sequence_padding_mask[:, :, None]
    if position_padding_mask is not None:
        keep = keep & ~position_padding_mask[:, None, :]
    return keep.unsqueeze(-1)


class _AxialProjections(nn.Module):
    """Q, K, V and output projections shared by row and column attention."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float) -> None:
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.dropout = dropout

    def _heads(self, x: Tensor) -> Tensor:
        """``(..., S, D)`` → ``(..., H, S, d)``."""
        return x.unflatten(-1, (self.num_heads, self.head_dim)).transpose(-3, -2)

    def _merge(self, x: Tensor) -> Tensor:
        """``(..., H, S, d)`` → ``(..., S, D)``."""
        return x.transpose(-3, -2).flatten(-2)

    def _dropout_p(self) -> float:
        return self.dropout if self.training else 0.0


class RowAttention(_AxialProjections):
    """Self-attention along each row (sequence) of an MSA, optionally tied across the rows.

    ``forward(x (B, N, L, D)) -> (out (B, N, L, D), weights)``; weights on request: ``(B, H, L, L)`` tied,
    ``(B, N, H, L, L)`` untied.
    """

    def __init__(self, embed_dim: int, num_heads: int, *, tied: bool = False, dropout: float = 0.0, chunk_size: int | None = None) -> None:
        super().__init__(embed_dim, num_heads, dropout)
        if chunk_size is not None and chunk_size < 1:
            raise ValueError(f"chunk_size must be ≥ 1 or None, got {chunk_size}")
        self.tied, self.chunk_size = tied, chunk_size

    def forward(
        self,
        x: Tensor,
        *,
        sequence_padding_mask: Tensor | None = None,
        position_padding_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        _check_input(x, self.embed_dim, sequence_padding_mask, position_padding_mask)
        b, n, length, _ = x.shape
        keep = _cell_keep(b, n, length, sequence_padding_mask, position_padding_mask, x.device)
        key_keep = None if position_padding_mask is None else ~position_padding_mask[:, None, None, :]  # (B, 1, 1, L)
        if self.tied:
            out, weights = self._tied(x, sequence_padding_mask, key_keep, need_weights)
        else:
            out, weights = self._untied(x, key_keep, need_weights)
        return (out if keep is None else out * keep), weights

    def _untied(self, x: Tensor, key_keep: Tensor | None, need_weights: bool) -> tuple[Tensor, Tensor | None]:
        b, n, length, _ = x.shape
        mask = None if key_keep is None else key_keep.unsqueeze(1)  # (B, 1, 1, 1, L)
        weights: list[Tensor] = []

        def rows(part: slice) -> Tensor:
            h = x[:, part]
            q, k, v = (self._heads(proj(h)) for proj in (self.q_proj, self.k_proj, self.v_proj))  # (B, n, H, L, d)
            out, w = _attend(q, k, v, mask, self._dropout_p(), need_weights)
            if w is not None:
                weights.append(w)
            return self.out_proj(self._merge(out))

        out = _over_chunks(rows, n, None if need_weights else self.chunk_size, dim=1)
        return out, (torch.cat(weights, dim=1) if need_weights else None)

    def _tied(
        self, x: Tensor, sequence_padding_mask: Tensor | None, key_keep: Tensor | None, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        b, n, length, _ = x.shape
        if sequence_padding_mask is None:
            row_keep = x.new_ones(b, n)
        else:
            row_keep = (~sequence_padding_mask).to(x.dtype)
        # MSA Transformer scaling 1/sqrt(d * rows), rows = real rows of each alignment; folded into q per alignment.
        q_scale = (row_keep / row_keep.sum(1, keepdim=True).clamp_min(1.0).sqrt())[:, :, None, None]  # (B, N, 1, 1)
        scale = 1.0 / math.sqrt(self.head_dim)
        if self.chunk_size is None or self.chunk_size >= n:
            return self._tied_fused(x, q_scale, key_keep, scale, need_weights)
        return self._tied_chunked(x, q_scale, key_keep, scale, need_weights)

    def _concat_rows(self, h: Tensor) -> Tensor:
        """``(B, N, L, D)`` → ``(B, H, L, N·d)``: each head's per-row vectors side by side."""
        b, n, length, _ = h.shape
        return h.view(b, n, length, self.num_heads, self.head_dim).permute(0, 3, 2, 1, 4).reshape(b, self.num_heads, length, n * self.head_dim)

    def _split_rows(self, h: Tensor, n: int) -> Tensor:
        """``(B, H, L, N·d)`` → ``(B, N, L, D)``."""
        b, _, length, _ = h.shape
        return h.view(b, self.num_heads, length, n, self.head_dim).permute(0, 3, 2, 1, 4).reshape(b, n, length, self.embed_dim)

    def _tied_fused(self, x: Tensor, q_scale: Tensor, key_keep: Tensor | None, scale: float, need_weights: bool) -> tuple[Tensor, Tensor | None]:
        n = x.size(1)
        q = self._concat_rows(self.q_proj(x) * q_scale)
        k = self._concat_rows(self.k_proj(x))
        v = self._concat_rows(self.v_proj(x))
        out, weights = scaled_dot_product_attention(q, k, v, key_keep, dropout_p=self._dropout_p(), scale=scale, need_weights=need_weights)
        return self.out_proj(self._split_rows(out, n)), weights

    def _tied_chunked(self, x: Tensor, q_scale: Tensor, key_keep: Tensor | None, scale: float, need_weights: bool) -> tuple[Tensor, Tensor]:
        b, n, length, _ = x.shape

        def partial_scores(part: slice) -> Tensor:
            q = self._heads(self.q_proj(x[:, part]) * q_scale[:, part])  # (B, n, H, L, d)
            k = self._heads(self.k_proj(x[:, part]))
            return torch.einsum("bnhid,bnhjd->bhij", q, k) * scale

        scores = sum(
            (checkpoint(partial_scores, part, use_reentrant=False) if torch.is_grad_enabled() else partial_scores(part))
            for part in (slice(s, s + self.chunk_size) for s in range(0, n, self.chunk_size))
        )
        if key_keep is not None:
            scores = scores.masked_fill(~key_keep, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        attn = nn.functional.dropout(weights, p=self._dropout_p(), training=self.training)

        def rows(part: slice) -> Tensor:
            v = self._heads(self.v_proj(x[:, part]))  # (B, n, H, L, d)
            return self.out_proj(self._merge(torch.einsum("bhij,bnhjd->bnhid", attn, v)))

        out = _over_chunks(rows, n, self.chunk_size, dim=1)
        return out, (weights if need_weights else None)


class ColumnAttention(_AxialProjections):
    """Self-attention along each column (across sequences) of an MSA: ``x (B, N, L, D) -> (B, N, L, D)``.

    Column maps are ``(B, L, H, N, N)`` — too large to return for deep alignments, so they never are.
    """

    def __init__(self, embed_dim: int, num_heads: int, *, dropout: float = 0.0, chunk_size: int | None = None) -> None:
        super().__init__(embed_dim, num_heads, dropout)
        if chunk_size is not None and chunk_size < 1:
            raise ValueError(f"chunk_size must be ≥ 1 or None, got {chunk_size}")
        self.chunk_size = chunk_size

    def forward(self, x: Tensor, *, sequence_padding_mask: Tensor | None = None, position_padding_mask: Tensor | None = None) -> Tensor:
        _check_input(x, self.embed_dim, sequence_padding_mask, position_padding_mask)
        b, n, length, _ = x.shape
        keep = _cell_keep(b, n, length, sequence_padding_mask, position_padding_mask, x.device)
        columns_first = x.transpose(1, 2)  # (B, L, N, D)
        mask = None if sequence_padding_mask is None else ~sequence_padding_mask[:, None, None, None, :]  # (B, 1, 1, 1, N)

        def columns(part: slice) -> Tensor:
            h = columns_first[:, part]
            q, k, v = (self._heads(proj(h)) for proj in (self.q_proj, self.k_proj, self.v_proj))  # (B, l, H, N, d)
            out, _ = _attend(q, k, v, mask, self._dropout_p())
            return self.out_proj(self._merge(out))

        out = _over_chunks(columns, length, self.chunk_size, dim=1).transpose(1, 2)
        return out if keep is None else out * keep


class AxialTransformerLayer(nn.Module):
    """Row attention, column attention and feed-forward, each as ``x + dropout(f(LayerNorm(x)))`` (pre-norm, as ESM's MSA Transformer).

    ``forward(x (B, N, L, D), *, sequence_padding_mask (B, N), position_padding_mask (B, L), need_weights)``
    ``-> (x (B, N, L, D), row weights (B, H, L, L) if tied else (B, N, H, L, L), or None)``.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        dim_feedforward: int | None = None,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        activation: str = "gelu",
        tied: bool = True,
        chunk_size: int | None = None,
    ) -> None:
        super().__init__()
        self.row_attention = RowAttention(embed_dim, num_heads, tied=tied, dropout=attention_dropout, chunk_size=chunk_size)
        self.column_attention = ColumnAttention(embed_dim, num_heads, dropout=attention_dropout, chunk_size=chunk_size)
        self.feed_forward = FeedForward(embed_dim, dim_feedforward or 4 * embed_dim, dropout, activation)
        self.row_norm = nn.LayerNorm(embed_dim)
        self.column_norm = nn.LayerNorm(embed_dim)
        self.feed_forward_norm = nn.LayerNorm(embed_dim)
        self.dropout = nn.Dropout(dropout)
        self.chunk_size = chunk_size

    def forward(
        self,
        x: Tensor,
        *,
        sequence_padding_mask: Tensor | None = None,
        position_padding_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        masks = {"sequence_padding_mask": sequence_padding_mask, "position_padding_mask": position_padding_mask}
        attended, weights = self.row_attention(self.row_norm(x), need_weights=need_weights, **masks)
        x = x + self.dropout(attended)
        hidden = x + self.dropout(self.column_attention(self.column_norm(x), **masks))
        keep = _cell_keep(*hidden.shape[:3], sequence_padding_mask, position_padding_mask, hidden.device)

        def feed_forward(part: slice) -> Tensor:  # reads `hidden`, never rebound: checkpoint recomputes from it
            return self.dropout(self.feed_forward(self.feed_forward_norm(hidden[:, part])))

        out = hidden + _over_chunks(feed_forward, hidden.size(1), self.chunk_size, dim=1)
        return (out if keep is None else out * keep), weights
