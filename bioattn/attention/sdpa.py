"""Scaled dot-product attention with one mask convention, fused by default.

``softmax(q·kᵀ · scale + mask) · v`` with ``scale = 1/sqrt(d)``. The default path calls
:func:`torch.nn.functional.scaled_dot_product_attention` (flash / memory-efficient kernels on GPU,
flash on CPU), whose memory is linear in the sequence length. ``need_weights=True`` switches to an
explicit softmax path that materialises and returns the ``(..., Lq, Lk)`` attention weights; both paths
agree to float32 round-off.

Mask convention (the same as torch's fused function): a **bool** mask is True where a query *may*
attend to a key; a **float** mask is added to the scores (use ``-inf`` to block). Masks broadcast to
``(..., Lq, Lk)``. A query row whose keys are all blocked returns zeros (never NaN) and zero weights.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["scaled_dot_product_attention", "causal_mask"]


def causal_mask(lq: int, lk: int, device: torch.device | None = None) -> Tensor:
    """Bool keep-mask ``(lq, lk)``: query i may attend keys ``0..i`` (top-left aligned, like torch)."""
    return torch.ones(lq, lk, dtype=torch.bool, device=device).tril()


def _check_inputs(q: Tensor, k: Tensor, v: Tensor, dropout_p: float) -> int:
    """Validate shapes; return the grouped-query factor ``Hq // Hkv`` (1 without grouping)."""
    if q.dim() < 2 or k.dim() != q.dim() or v.dim() != q.dim():
        raise ValueError(
            f"q, k, v must have the same rank >= 2, got q{tuple(q.shape)}, k{tuple(k.shape)}, v{tuple(v.shape)}"
        )
    if q.size(-1) != k.size(-1):
        raise ValueError(f"q and k must share the last dim d, got {q.size(-1)} and {k.size(-1)}")
    if k.shape[:-1] != v.shape[:-1]:
        raise ValueError(f"k{tuple(k.shape)} and v{tuple(v.shape)} must agree except in the last dim")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    if q.dim() >= 3 and q.size(-3) != k.size(-3):
        hq, hkv = q.size(-3), k.size(-3)
        if hq % hkv != 0:
            raise ValueError(f"query heads ({hq}) must be a multiple of key/value heads ({hkv}) for grouped attention")
        return hq // hkv
    return 1


def _with_causal(mask: Tensor | None, lq: int, lk: int, device: torch.device) -> Tensor:
    keep = causal_mask(lq, lk, device)
    if mask is None:
        return keep
    if mask.dtype == torch.bool:
        return mask & keep
    return mask.masked_fill(~keep, float("-inf"))


def _guard_empty_rows(mask: Tensor) -> tuple[Tensor, Tensor]:
    """Open up rows that block every key (so softmax stays finite); return (mask, row_is_valid (..., Lq, 1))."""
    if mask.dtype == torch.bool:
        valid = mask.any(dim=-1, keepdim=True)
        return mask | ~valid, valid
    valid = (mask != float("-inf")).any(dim=-1, keepdim=True)
    return mask.masked_fill(~valid, 0.0), valid


def _explicit_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float, scale: float, groups: int
) -> tuple[Tensor, Tensor]:
    if groups > 1:
        k = k.repeat_interleave(groups, dim=-3)
        v = v.repeat_interleave(groups, dim=-3)
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    weights = torch.softmax(scores, dim=-1, dtype=torch.promote_types(scores.dtype, torch.float32)).to(q.dtype)
    attn = F.dropout(weights, p=dropout_p, training=True) if dropout_p > 0 else weights
    return torch.matmul(attn, v), weights


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    causal: bool = False,
    dropout_p: float = 0.0,
    scale: float | None = None,
    need_weights: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Attention of queries over keys.

    Args:
        q: ``(..., Lq, d)``; with grouped-query attention ``(..., Hq, Lq, d)``.
        k: ``(..., Lk, d)``; with grouped-query attention ``(..., Hkv, Lk, d)``, ``Hq % Hkv == 0``.
        v: ``(..., Lk, dv)``.
        mask: bool ``(..., Lq, Lk)`` (True = may attend) or float (added to the scores), broadcastable.
        causal: block keys after the query position (top-left aligned); combines with ``mask``.
        dropout_p: dropout on the attention weights. Applied whenever > 0: pass 0.0 in eval mode
            (the modules of this package do that for you).
        scale: score scale, default ``1 / sqrt(d)``.
        need_weights: return the ``(..., Lq, Lk)`` weights (explicit path) instead of running the fused kernel.

    Returns:
        ``(out (..., Lq, dv), weights (..., Lq, Lk) or None)``. Weights are before dropout.
    """
    groups = _check_inputs(q, k, v, dropout_p)
    lq, lk = q.size(-2), k.size(-2)
    scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    if mask is not None and mask.dtype != torch.bool and not mask.is_floating_point():
        raise ValueError(f"mask must be bool or floating point, got {mask.dtype}")
    fused_causal = causal and mask is None and not need_weights
    if causal and not fused_causal:
        mask = _with_causal(mask, lq, lk, q.device)
    valid_rows = None
    if mask is not None:
        if mask.is_floating_point():
            mask = mask.to(q.dtype)
        mask, valid_rows = _guard_empty_rows(mask)

    if need_weights:
        out, weights = _explicit_attention(q, k, v, mask, dropout_p, scale, groups)
    else:
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=fused_causal, scale=scale, enable_gqa=groups > 1
        )
        weights = None
    if valid_rows is not None:
        out = out * valid_rows
        if weights is not None:
            weights = weights * valid_rows
    return out, weights
