"""Scaled dot-product attention with one mask convention: the single path of every bioattn attention block.

``softmax(q·kᵀ · scale + mask) · v``: torch's fused function on the kernel chosen by
:func:`~bioattn.attention.set_backend`, or with ``need_weights=True`` an explicit softmax. A bool mask is True where
a query *may* attend; float entries at or below :data:`BLOCKED_SCORE` block like ``-inf``.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import sdpa_kernel

from bioattn.attention.backends import get_backend, torch_backend
from bioattn.attention.inputs import check_mask_dtype

__all__ = ["scaled_dot_product_attention", "attention_weights", "BLOCKED_SCORE"]

#: Float-mask entries at or below this value block their key (treated as ``-inf``), compared in the mask's dtype.
BLOCKED_SCORE = -1e4


def _check_inputs(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float) -> int:
    """Validate shapes, dtypes and the mask; return the grouped-query factor ``Hq // Hkv`` (1 without grouping)."""
    if q.dim() < 2 or k.dim() != q.dim() or v.dim() != q.dim():
        raise ValueError(f"q, k, v must have the same rank >= 2, got q{tuple(q.shape)}, k{tuple(k.shape)}, "
                         f"v{tuple(v.shape)}")
    same_dtype = q.dtype == k.dtype == v.dtype or torch.is_autocast_enabled(q.device.type)
    floating = q.is_floating_point() and k.is_floating_point() and v.is_floating_point()
    if not (floating and same_dtype and q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be floating point with one dtype and device (outside autocast), got "
                         f"{q.dtype}/{k.dtype}/{v.dtype} on {q.device}/{k.device}/{v.device}")
    if q.size(-1) != k.size(-1):
        raise ValueError(f"q and k must share the last dim d, got {q.size(-1)} and {k.size(-1)}")
    if k.shape[:-1] != v.shape[:-1]:
        raise ValueError(f"k{tuple(k.shape)} and v{tuple(v.shape)} must agree except in the last dim")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be in [0, 1), got {dropout_p}")
    check_mask_dtype(mask, "mask", "True = may attend", "attention_mask.bool()")
    if mask is not None:
        scores_shape = (*q.shape[:-1], k.size(-2))
        try:
            broadcast = torch.broadcast_shapes(mask.shape, scores_shape)
        except RuntimeError:
            broadcast = None
        if broadcast != scores_shape:
            raise ValueError(f"mask {tuple(mask.shape)} must broadcast to the scores' shape (..., Lq, Lk) = {scores_shape}")
    if q.dim() >= 3 and q.size(-3) != k.size(-3):
        hq, hkv = q.size(-3), k.size(-3)
        if hq % hkv != 0:
            raise ValueError(f"query heads ({hq}) must be a multiple of key/value heads ({hkv}) for grouped attention")
        return hq // hkv
    return 1


def _with_causal(mask: Tensor | None, lq: int, lk: int, device: torch.device) -> Tensor:
    """Combine ``mask`` with the top-left-aligned causal keep-mask (query i may attend keys ``0..i``)."""
    keep = torch.ones(lq, lk, dtype=torch.bool, device=device).tril()
    if mask is None:
        return keep
    if mask.dtype == torch.bool:
        return mask & keep
    return mask.masked_fill(~keep, float("-inf"))


def _unless_blocks_nothing(mask: Tensor | None) -> Tensor | None:
    """None when ``mask`` is all True (bool) or all 0.0 (float), else ``mask`` (kept while compiling)."""
    if mask is None or torch.compiler.is_compiling():
        return mask
    blocks_nothing = bool(mask.all()) if mask.dtype == torch.bool else not bool(mask.any())
    return None if blocks_nothing else mask


def _prepare_mask(mask: Tensor | None, dtype: torch.dtype) -> tuple[Tensor | None, Tensor | None]:
    """``(mask or None, row_is_valid (..., Lq, 1) or None)``: float entries ``<= BLOCKED_SCORE`` become ``-inf``
    (before the cast to ``dtype``), fully blocked rows are opened up (the caller zeroes them)."""
    if mask is None:
        return None, None
    if mask.dtype == torch.bool:
        valid = mask.any(dim=-1, keepdim=True)
        return mask | ~valid, valid
    blocked = mask <= BLOCKED_SCORE
    valid = (~blocked).any(dim=-1, keepdim=True)
    return mask.masked_fill(blocked, float("-inf")).masked_fill(~valid, 0.0).to(dtype), valid


def _softmax(scores: Tensor, mask: Tensor | None) -> Tensor:
    """``softmax(scores + mask)`` in at least float32, returned in ``scores.dtype``; ``mask`` prepared."""
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    return torch.softmax(scores, dim=-1, dtype=torch.promote_types(scores.dtype, torch.float32)).to(scores.dtype)


def _dropout(weights: Tensor, dropout_p: float) -> Tensor:
    return F.dropout(weights, p=dropout_p, training=True) if dropout_p > 0 else weights


def attention_weights(scores: Tensor, mask: Tensor | None = None, *, dropout_p: float = 0.0) -> tuple[Tensor, Tensor]:
    """The explicit path's softmax of scaled ``scores (..., Lq, Lk)`` (``mask`` as in
    :func:`scaled_dot_product_attention`, dropout if ``dropout_p > 0``) → ``(weights after, before dropout)``."""
    check_mask_dtype(mask, "mask", "True = may attend", "attention_mask.bool()")
    mask, valid = _prepare_mask(_unless_blocks_nothing(mask), scores.dtype)
    weights = _softmax(scores, mask)
    if valid is not None:
        weights = weights * valid
    return _dropout(weights, dropout_p), weights


def _explicit_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float, scale: float,
                        groups: int) -> tuple[Tensor, Tensor]:
    if groups > 1:
        k = k.repeat_interleave(groups, dim=-3)
        v = v.repeat_interleave(groups, dim=-3)
    weights = _softmax(torch.matmul(q, k.transpose(-2, -1)) * scale, mask)
    return torch.matmul(_dropout(weights, dropout_p), v), weights


def _fused_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float, causal: bool, scale: float,
                     groups: int) -> Tensor:
    """torch's fused function on the kernel chosen by :func:`~bioattn.attention.set_backend`."""
    kwargs = {"attn_mask": mask, "dropout_p": dropout_p, "is_causal": causal, "scale": scale, "enable_gqa": groups > 1}
    name = get_backend()
    chosen = torch_backend(name)
    if chosen is None:
        return F.scaled_dot_product_attention(q, k, v, **kwargs)
    try:
        with sdpa_kernel(chosen):
            return F.scaled_dot_product_attention(q, k, v, **kwargs)
    except RuntimeError as err:
        raise RuntimeError(f"attention backend {name!r} cannot run these inputs (q {tuple(q.shape)} {q.dtype} on "
                           f"{q.device}, mask: {'yes' if mask is not None else 'no'}, dropout_p={dropout_p}); choose "
                           f"another with bioattn.attention.set_backend (e.g. 'auto'). torch: {err}") from err


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, *, causal: bool = False,
                                 dropout_p: float = 0.0, scale: float | None = None,
                                 need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
    """``q (..., Lq, d)``, ``k (..., Lk, d)``, ``v (..., Lk, dv)`` → ``(out (..., Lq, dv), weights or None)``.

    Grouped-query: ``q (..., Hq, Lq, d)``, ``k``/``v`` with ``Hkv`` heads, ``Hq % Hkv == 0``. ``mask``: bool (True =
    may attend) or float (added; ``<= -1e4`` blocks), broadcastable to ``(..., Lq, Lk)``. ``causal``: block keys
    after the query position (top-left aligned). ``dropout_p``: applied whenever > 0. ``scale``: default
    ``1 / sqrt(d)``. ``need_weights``: also return the weights before dropout (explicit path).
    """
    groups = _check_inputs(q, k, v, mask, dropout_p)
    lq, lk = q.size(-2), k.size(-2)
    scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    explicit = need_weights or get_backend() == "explicit"
    mask = _unless_blocks_nothing(mask)
    fused_causal = causal and mask is None and not explicit
    if causal and not fused_causal:
        mask = _with_causal(mask, lq, lk, q.device)
    mask, valid_rows = _prepare_mask(mask, q.dtype)
    if explicit:
        out, weights = _explicit_attention(q, k, v, mask, dropout_p, scale, groups)
    else:
        out, weights = _fused_attention(q, k, v, mask, dropout_p, fused_causal, scale, groups), None
    if valid_rows is not None:
        out = out * valid_rows
        if weights is not None:
            weights = weights * valid_rows
    return out, (weights if need_weights else None)
