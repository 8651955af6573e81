"""Axial attention over a multiple sequence alignment ``x: (B, N, L, D)`` (batch, sequences, positions, channels).

Masks: ``sequence_padding_mask (B, N)`` and ``position_padding_mask (B, L)``, True = padding; padded cells never
influence real ones and output zeros. ``chunk_size`` bounds memory (:func:`~bioattn.attention.apply_in_chunks`).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from bioattn.attention.chunking import apply_in_chunks
from bioattn.attention.encoder import FeedForward
from bioattn.attention.inputs import check_embeddings, check_mask_dtype
from bioattn.attention.sdpa import attention_weights, scaled_dot_product_attention

__all__ = ["RowAttention", "ColumnAttention", "AxialTransformerLayer"]

_MSA_LAYOUT_HINT = "MSAs are batch-first (B, N, L, D); ESM's (N, L, B, D) layout converts with x.permute(2, 0, 1, 3)"


def _check_input(x: Tensor, embed_dim: int, weight: Tensor, sequence_padding_mask: Tensor | None,
                 position_padding_mask: Tensor | None) -> None:
    if isinstance(x, Tensor) and x.dim() != 4:
        raise ValueError(f"expected x of shape (B, N, L, {embed_dim}), got {tuple(x.shape)}: {_MSA_LAYOUT_HINT}")
    check_embeddings(x, "x", "(B, N, L, D)", embed_dim, weight, hint=_MSA_LAYOUT_HINT)
    b, n, length, _ = x.shape
    for name, mask, shape in (("sequence_padding_mask", sequence_padding_mask, (b, n)), ("position_padding_mask", position_padding_mask, (b, length))):
        check_mask_dtype(mask, name, "True = padding", "attention_mask == 0", allow_float=False, shape=shape)
        if mask is not None and tuple(mask.shape) != shape:
            raise ValueError(f"{name} must be a bool tensor of shape {shape} (True = padding), "
                             f"got {tuple(mask.shape)}; x {tuple(x.shape)} is read as (B, N, L, D): {_MSA_LAYOUT_HINT}")


def _attend(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
    """Attention on ``(*lead, H, S, d)`` inputs, flattened to 4-D; bool keep-``mask`` broadcastable to the scores."""
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


def _check_chunk_size(chunk_size: int | None) -> None:
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"chunk_size must be ≥ 1 or None, got {chunk_size}")


class _AxialProjections(nn.Module):
    """Q, K, V and output projections shared by row and column attention."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float, chunk_size: int | None) -> None:
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        _check_chunk_size(chunk_size)
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(embed_dim, embed_dim) for _ in range(4))
        self.dropout = dropout
        self.chunk_size = chunk_size

    def _check(self, x: Tensor, sequence_padding_mask: Tensor | None, position_padding_mask: Tensor | None) -> None:
        _check_input(x, self.embed_dim, self.q_proj.weight, sequence_padding_mask, position_padding_mask)

    def _heads(self, x: Tensor) -> Tensor:
        """``(..., S, D)`` → ``(..., H, S, d)``."""
        return x.unflatten(-1, (self.num_heads, self.head_dim)).transpose(-3, -2)

    def _merge(self, x: Tensor) -> Tensor:
        """``(..., H, S, d)`` → ``(..., S, D)``."""
        return x.transpose(-3, -2).flatten(-2)

    def _dropout_p(self) -> float:
        return self.dropout if self.training else 0.0


class RowAttention(_AxialProjections):
    """Self-attention along each row of an MSA of ``embed_dim`` channels and ``num_heads`` heads; ``tied`` shares one
    ``(L, L)`` map per head across the rows (scaled by ``1/sqrt(d·N)`` as in MSA Transformer), ``dropout`` acts on
    the attention weights, ``chunk_size`` rows are processed at a time (None: all)."""

    def __init__(self, embed_dim: int, num_heads: int, *, tied: bool = False, dropout: float = 0.0, chunk_size: int | None = None) -> None:
        super().__init__(embed_dim, num_heads, dropout, chunk_size)
        self.tied = tied

    def forward(self, x: Tensor, *, sequence_padding_mask: Tensor | None = None, position_padding_mask: Tensor | None = None,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """``x (B, N, L, D)``, ``sequence_padding_mask (B, N)``, ``position_padding_mask (B, L)`` →
        ``(out (B, N, L, D), weights (B, H, L, L) tied, (B, N, H, L, L) untied, or None)``; with ``need_weights``."""
        self._check(x, sequence_padding_mask, position_padding_mask)
        b, n, length, _ = x.shape
        keep = _cell_keep(b, n, length, sequence_padding_mask, position_padding_mask, x.device)
        key_keep = None if position_padding_mask is None else ~position_padding_mask[:, None, None, :]  # (B, 1, 1, L)
        if self.tied:
            out, weights = self._tied(x, sequence_padding_mask, key_keep, need_weights)
        else:
            out, weights = self._untied(x, key_keep, need_weights)
        return (out if keep is None else out * keep), weights

    def _untied(self, x: Tensor, key_keep: Tensor | None, need_weights: bool) -> tuple[Tensor, Tensor | None]:
        mask = None if key_keep is None else key_keep.unsqueeze(1)  # (B, 1, 1, 1, L)

        def rows(h: Tensor) -> tuple[Tensor, Tensor | None]:
            """``h (B, n, L, D)`` → ``(out (B, n, L, D), weights (B, n, H, L, L) or None)``."""
            q, k, v = (self._heads(proj(h)) for proj in (self.q_proj, self.k_proj, self.v_proj))  # (B, n, H, L, d)
            out, weights = _attend(q, k, v, mask, self._dropout_p(), need_weights)
            return self.out_proj(self._merge(out)), weights
        return apply_in_chunks(rows, x, chunk_size=self.chunk_size, dim=1, checkpoint=True)

    def _tied(self, x: Tensor, sequence_padding_mask: Tensor | None, key_keep: Tensor | None,
              need_weights: bool) -> tuple[Tensor, Tensor | None]:
        b, n, length, _ = x.shape
        row_keep = x.new_ones(b, n) if sequence_padding_mask is None else (~sequence_padding_mask).to(x.dtype)
        # MSA Transformer scaling 1/sqrt(d * real rows), folded into q per alignment.
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
        q = self.q_proj(x)
        q = self._concat_rows(q * q_scale.to(q.dtype))
        k = self._concat_rows(self.k_proj(x))
        v = self._concat_rows(self.v_proj(x))
        out, weights = scaled_dot_product_attention(q, k, v, key_keep, dropout_p=self._dropout_p(), scale=scale, need_weights=need_weights)
        return self.out_proj(self._split_rows(out, n)), weights

    def _tied_chunked(self, x: Tensor, q_scale: Tensor, key_keep: Tensor | None, scale: float, need_weights: bool) -> tuple[Tensor, Tensor | None]:
        """The tied map's scores summed over row chunks, one masked softmax, then the output row chunk by row chunk."""
        def partial_scores(h: Tensor, h_scale: Tensor) -> Tensor:
            """``h (B, n, L, D)``, ``h_scale (B, n, 1, 1)`` → these rows' share of the scores ``(B, H, L, L)``."""
            q = self.q_proj(h)
            q = self._concat_rows(q * h_scale.to(q.dtype))  # (B, H, L, n·d): the sum over rows is one matmul
            k = self._concat_rows(self.k_proj(h))
            return torch.matmul(q, k.transpose(-2, -1)) * scale
        scores = apply_in_chunks(partial_scores, x, q_scale, chunk_size=self.chunk_size, dim=1, reduce="sum", checkpoint=True)
        attention, weights = attention_weights(scores, key_keep, dropout_p=self._dropout_p())  # (B, H, L, L)

        def rows(h: Tensor) -> Tensor:
            """``h (B, n, L, D)`` → ``(B, n, L, D)``: the shared map applied to these rows' values."""
            v = self._heads(self.v_proj(h))  # (B, n, H, L, d)
            return self.out_proj(self._merge(torch.matmul(attention.unsqueeze(1), v)))
        out = apply_in_chunks(rows, x, chunk_size=self.chunk_size, dim=1, checkpoint=True)
        return out, (weights if need_weights else None)


class ColumnAttention(_AxialProjections):
    """Self-attention along each column (across sequences) of an MSA of ``embed_dim`` channels, ``num_heads`` heads;
    ``dropout`` on the attention weights, ``chunk_size`` columns at a time (None: all)."""

    def __init__(self, embed_dim: int, num_heads: int, *, dropout: float = 0.0, chunk_size: int | None = None) -> None:
        super().__init__(embed_dim, num_heads, dropout, chunk_size)

    def forward(self, x: Tensor, *, sequence_padding_mask: Tensor | None = None, position_padding_mask: Tensor | None = None,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """``x (B, N, L, D)``, ``sequence_padding_mask (B, N)``, ``position_padding_mask (B, L)`` →
        ``(out (B, N, L, D), weights (B, L, H, N, N) or None)``; weights only with ``need_weights``."""
        self._check(x, sequence_padding_mask, position_padding_mask)
        b, n, length, _ = x.shape
        keep = _cell_keep(b, n, length, sequence_padding_mask, position_padding_mask, x.device)
        mask = None if sequence_padding_mask is None else ~sequence_padding_mask[:, None, None, None, :]  # (B, 1, 1, 1, N)

        def columns(h: Tensor) -> tuple[Tensor, Tensor | None]:
            """``h (B, N, l, D)`` → ``(out (B, N, l, D), weights (B, H, l, N, N) or None)``, within each of the l columns."""
            h = h.transpose(1, 2)  # (B, l, N, D)
            q, k, v = (self._heads(proj(h)) for proj in (self.q_proj, self.k_proj, self.v_proj))  # (B, l, H, N, d)
            out, weights = _attend(q, k, v, mask, self._dropout_p(), need_weights)
            return self.out_proj(self._merge(out)).transpose(1, 2), (None if weights is None else weights.transpose(1, 2))
        out, weights = apply_in_chunks(columns, x, chunk_size=self.chunk_size, dim=2, checkpoint=True)
        weights = None if weights is None else weights.transpose(1, 2)  # chunks are joined along dim 2: (B, H, L, N, N)
        return (out if keep is None else out * keep), weights


class AxialTransformerLayer(nn.Module):
    """Row attention, column attention and feed-forward, each as ``x + dropout(f(LayerNorm(x)))``: ``embed_dim``
    channels, ``num_heads`` heads, ``dim_feedforward`` hidden units (default 4·embed_dim) with ``activation``,
    ``dropout`` on the residual branches and hidden units, ``attention_dropout`` on the attention weights; ``tied``
    and ``chunk_size`` as in :class:`RowAttention`."""

    def __init__(self, embed_dim: int, num_heads: int, *, dim_feedforward: int | None = None, dropout: float = 0.1,
                 attention_dropout: float = 0.0, activation: str = "gelu", tied: bool = True,
                 chunk_size: int | None = None) -> None:
        super().__init__()
        _check_chunk_size(chunk_size)
        self.row_attention = RowAttention(embed_dim, num_heads, tied=tied, dropout=attention_dropout, chunk_size=chunk_size)
        self.column_attention = ColumnAttention(embed_dim, num_heads, dropout=attention_dropout, chunk_size=chunk_size)
        self.feed_forward = FeedForward(embed_dim, dim_feedforward or 4 * embed_dim, dropout, activation)
        self.row_norm = nn.LayerNorm(embed_dim)
        self.column_norm = nn.LayerNorm(embed_dim)
        self.feed_forward_norm = nn.LayerNorm(embed_dim)
        self.dropout = nn.Dropout(dropout)
        self.chunk_size = chunk_size

    def forward(self, x: Tensor, *, sequence_padding_mask: Tensor | None = None, position_padding_mask: Tensor | None = None,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """``x (B, N, L, D)``, ``sequence_padding_mask (B, N)``, ``position_padding_mask (B, L)`` →
        ``(x (B, N, L, D), row weights as :class:`RowAttention` returns them with need_weights, or None)``."""
        _check_input(x, self.row_norm.normalized_shape[0], self.row_norm.weight, sequence_padding_mask, position_padding_mask)
        masks = {"sequence_padding_mask": sequence_padding_mask, "position_padding_mask": position_padding_mask}
        attended, weights = self.row_attention(self.row_norm(x), need_weights=need_weights, **masks)
        x = x + self.dropout(attended)
        column_out, _ = self.column_attention(self.column_norm(x), **masks)
        hidden = x + self.dropout(column_out)
        keep = _cell_keep(*hidden.shape[:3], sequence_padding_mask, position_padding_mask, hidden.device)

        def feed_forward(h: Tensor) -> Tensor:
            return self.dropout(self.feed_forward(self.feed_forward_norm(h)))
        out = hidden + apply_in_chunks(feed_forward, hidden, chunk_size=self.chunk_size, dim=1, checkpoint=True)
        return (out if keep is None else out * keep), weights
