"""Transformer encoder layers: attention and feed-forward sub-blocks, each with residual + LayerNorm."""
from __future__ import annotations

from typing import Callable

import torch.nn.functional as F
from torch import Tensor, nn

from bioattn.attention.inputs import check_embeddings, check_padding_mask
from bioattn.attention.mha import MultiHeadAttention

__all__ = ["FeedForward", "TransformerEncoderLayer", "TransformerEncoder"]

_ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"gelu": F.gelu, "relu": F.relu, "silu": F.silu}


class FeedForward(nn.Module):
    """Position-wise ``Linear(embed_dim, dim_feedforward) → activation → dropout → Linear(.., embed_dim)``;
    ``activation``: ``"gelu"``, ``"relu"`` or ``"silu"``."""

    def __init__(self, embed_dim: int, dim_feedforward: int, dropout: float = 0.0, activation: str = "gelu") -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        self.linear1 = nn.Linear(embed_dim, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, embed_dim)
        self.dropout = nn.Dropout(dropout)
        self.activation = _ACTIVATIONS[activation]

    def forward(self, x: Tensor) -> Tensor:
        """``x: (..., D)`` → ``(..., D)``."""
        return self.linear2(self.dropout(self.activation(self.linear1(x))))


class TransformerEncoderLayer(nn.Module):
    """Self-attention then feed-forward, each with residual + LayerNorm (pre-norm with ``norm_first``), matching
    :class:`torch.nn.TransformerEncoderLayer` (batch-first). ``embed_dim``, ``num_heads``, ``kv_heads``,
    ``head_temperature``: as in :class:`~bioattn.attention.MultiHeadAttention`; ``dim_feedforward`` (default
    4·embed_dim) hidden units with ``activation`` (``"gelu"``, ``"relu"``, ``"silu"``); ``dropout`` on the residual
    branches, also the default of ``attention_dropout`` and ``ffn_dropout``; ``layer_norm_eps``."""

    def __init__(self, embed_dim: int, num_heads: int, *, dim_feedforward: int | None = None, dropout: float = 0.1,
                 attention_dropout: float | None = None, ffn_dropout: float | None = None, activation: str = "gelu",
                 norm_first: bool = True, kv_heads: int | None = None, layer_norm_eps: float = 1e-5,
                 head_temperature: bool = False) -> None:
        super().__init__()
        attention_dropout = dropout if attention_dropout is None else attention_dropout
        ffn_dropout = dropout if ffn_dropout is None else ffn_dropout
        self.self_attn = MultiHeadAttention(embed_dim, num_heads, kv_heads=kv_heads, dropout=attention_dropout,
                                            head_temperature=head_temperature)
        self.feed_forward = FeedForward(embed_dim, dim_feedforward or 4 * embed_dim, ffn_dropout, activation)
        self.norm1 = nn.LayerNorm(embed_dim, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(embed_dim, eps=layer_norm_eps)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x: Tensor, *, key_padding_mask: Tensor | None = None, attn_mask: Tensor | None = None,
                causal: bool = False, need_weights: bool = False,
                first_outputs: int | None = None) -> tuple[Tensor, Tensor | None]:
        """``x (B, L, D)`` → ``(x (B, N, D), weights (B, H, N, L) or None)``; N = L without ``first_outputs``.

        ``key_padding_mask``, ``attn_mask``, ``causal``, ``need_weights``: as in
        :meth:`MultiHeadAttention.forward`. ``first_outputs``: compute only the first N positions' outputs (queries
        from those, keys from all L), equal to ``[:, :N]`` of the full layer.
        """
        check_embeddings(x, "x", "(B, L, D)", self.norm1.normalized_shape[0], self.norm1.weight)
        check_padding_mask(key_padding_mask, "key_padding_mask", tuple(x.shape[:2]))
        if first_outputs is not None and not 1 <= first_outputs <= x.shape[1]:
            raise ValueError(f"first_outputs must be between 1 and the sequence length {x.shape[1]}, got {first_outputs}")
        if first_outputs is not None and attn_mask is not None:
            attn_mask = attn_mask[..., :first_outputs, :]

        def attend(h: Tensor) -> tuple[Tensor, Tensor | None]:
            queries, keys = (h, None) if first_outputs is None else (h[:, :first_outputs], h)
            out, weights = self.self_attn(queries, keys, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
                                          causal=causal, need_weights=need_weights)
            return self.dropout1(out), weights
        kept = x[:, :first_outputs]
        if self.norm_first:
            attended, weights = attend(self.norm1(x))
            x = kept + attended
            x = x + self.dropout2(self.feed_forward(self.norm2(x)))
        else:
            attended, weights = attend(x)
            x = self.norm1(kept + attended)
            x = self.norm2(x + self.dropout2(self.feed_forward(x)))
        return x, weights


class TransformerEncoder(nn.Module):
    """A stack of ``num_layers`` :class:`TransformerEncoderLayer` (embed_dim, num_heads, dim_feedforward, dropout,
    attention_dropout, ffn_dropout, activation, norm_first, kv_heads, layer_norm_eps, head_temperature: the same for
    every layer); pre-norm stacks end with a final LayerNorm."""

    def __init__(self, embed_dim: int, num_heads: int, num_layers: int, *, dim_feedforward: int | None = None,
                 dropout: float = 0.1, attention_dropout: float | None = None, ffn_dropout: float | None = None,
                 activation: str = "gelu", norm_first: bool = True, kv_heads: int | None = None,
                 layer_norm_eps: float = 1e-5, head_temperature: bool = False) -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        self.layers = nn.ModuleList(
            TransformerEncoderLayer(embed_dim, num_heads, dim_feedforward=dim_feedforward, dropout=dropout,
                                    attention_dropout=attention_dropout, ffn_dropout=ffn_dropout, activation=activation,
                                    norm_first=norm_first, kv_heads=kv_heads, layer_norm_eps=layer_norm_eps,
                                    head_temperature=head_temperature)
            for _ in range(num_layers))
        self.norm = nn.LayerNorm(embed_dim, eps=layer_norm_eps) if norm_first else nn.Identity()

    def forward(self, x: Tensor, *, key_padding_mask: Tensor | None = None, attn_mask: Tensor | None = None,
                causal: bool = False, need_weights: bool = False,
                first_outputs: int | None = None) -> tuple[Tensor, list[Tensor] | None]:
        """``x (B, L, D)`` → ``(x (B, N, D), [weights (B, H, L, L) per layer, the last (B, H, N, L)] or None)``;
        ``key_padding_mask``, ``attn_mask``, ``causal``, ``need_weights``, ``first_outputs``: as in
        :meth:`TransformerEncoderLayer.forward`."""
        all_weights: list[Tensor] = []
        last = len(self.layers) - 1
        for index, layer in enumerate(self.layers):
            x, weights = layer(x, key_padding_mask=key_padding_mask, attn_mask=attn_mask, causal=causal,
                               need_weights=need_weights, first_outputs=first_outputs if index == last else None)
            if weights is not None:
                all_weights.append(weights)
        return self.norm(x), (all_weights if need_weights else None)
