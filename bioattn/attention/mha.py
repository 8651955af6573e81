"""Multi-head attention (batch-first), self or cross, with optional grouped/multi-query K/V."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bioattn.attention.inputs import check_embeddings, check_mask_dtype, check_padding_mask
from bioattn.attention.sdpa import scaled_dot_product_attention

__all__ = ["MultiHeadAttention", "blocked_to_additive"]


def blocked_to_additive(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """Turn a bool *blocked* mask (True = may not attend) into an additive float mask (0 / -inf)."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, float("-inf"))


class MultiHeadAttention(nn.Module):
    """``num_heads`` heads H of width ``embed_dim / H``, concatenated and projected back; batch-first.

    ``kv_heads``: key/value heads (grouped-query; None = H, 1 = multi-query); ``dropout`` on the attention weights
    (training only); ``bias`` on the four projections; ``kdim``, ``vdim``: widths of ``key`` and ``value`` (default
    ``embed_dim``); ``head_temperature``: learn an inverse temperature per head, ``exp(log_head_scale[h])``.
    """

    def __init__(self, embed_dim: int, num_heads: int, *, kv_heads: int | None = None, dropout: float = 0.0,
                 bias: bool = True, kdim: int | None = None, vdim: int | None = None,
                 head_temperature: bool = False) -> None:
        super().__init__()
        kv_heads = num_heads if kv_heads is None else kv_heads
        if embed_dim <= 0 or num_heads <= 0 or kv_heads <= 0:
            raise ValueError(f"embed_dim, num_heads, kv_heads must be positive, got {embed_dim}, {num_heads}, {kv_heads}")
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        if num_heads % kv_heads:
            raise ValueError(f"num_heads ({num_heads}) must be divisible by kv_heads ({kv_heads})")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.embed_dim, self.num_heads, self.kv_heads = embed_dim, num_heads, kv_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = dropout
        self.kdim, self.vdim = kdim or embed_dim, vdim or embed_dim
        kv_width = kv_heads * self.head_dim
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(self.kdim, kv_width, bias=bias)
        self.v_proj = nn.Linear(self.vdim, kv_width, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.log_head_scale = nn.Parameter(torch.zeros(num_heads)) if head_temperature else None
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            nn.init.xavier_uniform_(proj.weight)
            if proj.bias is not None:
                nn.init.zeros_(proj.bias)
        if self.out_proj.bias is not None:
            nn.init.zeros_(self.out_proj.bias)

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """One fused GEMM for self-attention (same tensor, same widths), three otherwise."""
        if query is key and key is value and self.kdim == self.vdim == self.embed_dim:
            projs = (self.q_proj, self.k_proj, self.v_proj)
            weight = torch.cat([p.weight for p in projs])
            bias = None if self.q_proj.bias is None else torch.cat([p.bias for p in projs])
            kv_width = self.kv_heads * self.head_dim
            return F.linear(query, weight, bias).split([self.embed_dim, kv_width, kv_width], dim=-1)
        return self.q_proj(query), self.k_proj(key), self.v_proj(value)

    def _keep_mask(self, key_padding_mask: Tensor | None, attn_mask: Tensor | None, batch: int, lq: int,
                   lk: int) -> Tensor | None:
        """Both masks as one ``(B|1, H|1, Lq|1, Lk)``: a bool keep-mask, or additive with a float mask among them."""
        check_padding_mask(key_padding_mask, "key_padding_mask", (batch, lk))
        check_mask_dtype(attn_mask, "attn_mask", "True = not allowed", "attention_mask == 0")
        parts = []
        if key_padding_mask is not None:
            parts.append(key_padding_mask[:, None, None, :])
        if attn_mask is not None:
            if attn_mask.dim() == 3 and attn_mask.size(0) == batch * self.num_heads:  # torch's (B*H, Lq, Lk) layout
                attn_mask = attn_mask.reshape(batch, self.num_heads, *attn_mask.shape[-2:])
            if attn_mask.shape[-2:] != (lq, lk) or attn_mask.dim() not in (2, 4):
                raise ValueError(f"attn_mask must be (Lq, Lk), (B*H, Lq, Lk) or (B, H, Lq, Lk) with B={batch}, "
                                 f"H={self.num_heads}, Lq={lq}, Lk={lk}, got {tuple(attn_mask.shape)}")
            parts.append(attn_mask)
        if not parts:
            return None
        if all(p.dtype == torch.bool for p in parts):
            return ~(parts[0] if len(parts) == 1 else parts[0] | parts[1])
        dtype = next(p.dtype for p in parts if p.is_floating_point())
        additive = [blocked_to_additive(p, dtype) if p.dtype == torch.bool else p for p in parts]
        return additive[0] if len(additive) == 1 else additive[0] + additive[1]

    def forward(self, query: Tensor, key: Tensor | None = None, value: Tensor | None = None, *,
                key_padding_mask: Tensor | None = None, attn_mask: Tensor | None = None, causal: bool = False,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """``query (B, Lq, E)`` over ``key (B, Lk, kdim)`` (None: self-attention) and ``value (B, Lk, vdim)`` (default
        ``key``) → ``(out (B, Lq, E), weights (B, H, Lq, Lk) with need_weights, else None)``.

        ``key_padding_mask (B, Lk)``: bool True = padding; ``attn_mask`` ``(Lq, Lk)``, ``(B*H, Lq, Lk)`` or
        ``(B, H, Lq, Lk)``: bool True = not allowed. Float masks are added to the scores (``<= -1e4`` blocks),
        integer masks refused; fully masked queries give zeros. ``causal``: block keys after each query.
        """
        check_embeddings(query, "query", "(B, Lq, E)", self.embed_dim, self.q_proj.weight)
        key = query if key is None else key
        value = key if value is None else value
        if key is not query:
            check_embeddings(key, "key", "(B, Lk, kdim)", self.kdim, self.k_proj.weight)
        if value is not key:
            check_embeddings(value, "value", "(B, Lk, vdim)", self.vdim, self.v_proj.weight)
        if key.shape[:2] != value.shape[:2] or key.size(0) != query.size(0):
            raise ValueError(f"key {tuple(key.shape)} and value {tuple(value.shape)} must be (B, Lk, *) with B={query.size(0)}")
        batch, lq, lk = query.size(0), query.size(1), key.size(1)
        mask = self._keep_mask(key_padding_mask, attn_mask, batch, lq, lk)
        q, k, v = self._project(query, key, value)
        q = q.view(batch, lq, self.num_heads, self.head_dim).transpose(1, 2)
        if self.log_head_scale is not None:
            q = q * self.log_head_scale.exp().to(q.dtype)[:, None, None]
        k = k.view(batch, lk, self.kv_heads, self.head_dim).transpose(1, 2)
        v = v.view(batch, lk, self.kv_heads, self.head_dim).transpose(1, 2)
        out, weights = scaled_dot_product_attention(q, k, v, mask, causal=causal,
                                                    dropout_p=self.dropout if self.training else 0.0,
                                                    need_weights=need_weights)
        out = out.transpose(1, 2).reshape(batch, lq, self.embed_dim)
        return self.out_proj(out), weights

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> "MultiHeadAttention":
        """Copy a :class:`torch.nn.MultiheadAttention` (same weights, same outputs, batch-first)."""
        if module.bias_k is not None or module.add_zero_attn:
            raise ValueError("from_torch does not support add_bias_kv=True or add_zero_attn=True")
        bias = module.in_proj_bias is not None
        new = cls(module.embed_dim, module.num_heads, dropout=module.dropout, bias=bias, kdim=module.kdim, vdim=module.vdim)
        new = new.to(device=module.out_proj.weight.device, dtype=module.out_proj.weight.dtype)
        e = module.embed_dim
        with torch.no_grad():
            weights = (module.in_proj_weight.split(e) if module._qkv_same_embed_dim
                       else (module.q_proj_weight, module.k_proj_weight, module.v_proj_weight))
            for proj, weight, index in zip((new.q_proj, new.k_proj, new.v_proj), weights, range(3)):
                proj.weight.copy_(weight)
                if bias:
                    proj.bias.copy_(module.in_proj_bias[index * e : (index + 1) * e])
            new.out_proj.weight.copy_(module.out_proj.weight)
            if bias:
                new.out_proj.bias.copy_(module.out_proj.bias)
        return new.train(module.training)
