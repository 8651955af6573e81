"""Attention rollout (Abnar & Zuidema, 2020): each layer's head-fused map plus the identity (the residual path),
row-normalised and multiplied through the layers. A hypothesis about which inputs drove a prediction, not a causal
attribution (MLPs, norms and values are ignored).
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from bioattn.attention.chunking import apply_in_chunks
from bioattn.errors import UserInputError

HEAD_FUSIONS = ("mean", "max", "min")


def fuse_heads(weights: Tensor, head_fusion: str = "mean") -> Tensor:
    """``(B, H, L, L)`` → ``(B, L, L)``: mean, max or min over heads."""
    if head_fusion not in HEAD_FUSIONS:
        raise UserInputError(f"head_fusion must be one of {HEAD_FUSIONS}, got {head_fusion!r}")
    if weights.dim() != 4:
        raise UserInputError(f"attention weights must be (B, H, L, L), got shape {tuple(weights.shape)}")
    return {"mean": weights.mean, "max": weights.amax, "min": weights.amin}[head_fusion](dim=1)


def _validate(weights: Sequence[Tensor], start_layer: int, key_padding_mask: Tensor | None) -> tuple[int, int]:
    if weights is None:
        raise UserInputError("no attention weights: run the model with need_weights=True")
    if isinstance(weights, Tensor) or len(weights) == 0:
        raise UserInputError("weights must be a non-empty list of per-layer (B, H, L, L) attention maps")
    shape = tuple(weights[0].shape)
    for index, layer in enumerate(weights):
        if layer is None:
            raise UserInputError(f"weights[{index}] is None; run the model with need_weights=True")
        if layer.dim() != 4 or layer.shape[-1] != layer.shape[-2]:
            raise UserInputError(f"weights[{index}] must be a square (B, H, L, L) map, got {tuple(layer.shape)}")
        if tuple(layer.shape) != shape:
            raise UserInputError(f"weights[{index}] has shape {tuple(layer.shape)}, weights[0] has {shape}")
    if not 0 <= start_layer < len(weights):
        raise UserInputError(f"start_layer must be in [0, {len(weights) - 1}], got {start_layer}")
    batch, length = shape[0], shape[-1]
    if key_padding_mask is not None and (key_padding_mask.dtype != torch.bool
                                         or tuple(key_padding_mask.shape) != (batch, length)):
        raise UserInputError(f"key_padding_mask must be a bool (B, L) = ({batch}, {length}) tensor (True = padding), "
                             f"got {key_padding_mask.dtype} {tuple(key_padding_mask.shape)}")
    return batch, length


def _transition(layer: Tensor, dtype: torch.dtype, residual: bool, head_fusion: str, real: Tensor | None) -> Tensor:
    """One rollout step ``(B, L, L)``: heads fused, identity added, padding (``real (B, L)`` 0) removed, rows
    re-normalised."""
    fused = fuse_heads(layer.detach().to(dtype), head_fusion)
    if residual:
        fused.diagonal(dim1=-2, dim2=-1).add_(1.0)
    if real is not None:
        fused = fused * real[:, :, None] * real[:, None, :]
    row_sums = fused.sum(dim=-1, keepdim=True)
    return torch.where(row_sums > 0, fused / row_sums.clamp_min(torch.finfo(dtype).tiny), torch.zeros_like(fused))


def _prepare(weights: Sequence[Tensor], start_layer: int,
             key_padding_mask: Tensor | None) -> tuple[int, int, torch.dtype, Tensor | None]:
    """Validate; return ``(batch, length, dtype, real)`` with ``real (B, L)`` (1 = real token) or ``None``."""
    batch, length = _validate(weights, start_layer, key_padding_mask)
    dtype = torch.float64 if weights[0].dtype == torch.float64 else torch.float32
    real = None if key_padding_mask is None else (~key_padding_mask.to(weights[0].device)).to(dtype)
    return batch, length, dtype, real


def attention_rollout(weights: Sequence[Tensor], *, residual: bool = True, head_fusion: str = "mean",
                      start_layer: int = 0, key_padding_mask: Tensor | None = None) -> Tensor:
    """Rollout ``R = A_last @ ... @ A_start`` ``(B, L, L)`` of per-layer ``weights`` ``(B, H, L, L)`` (rows =
    queries): heads fused by ``head_fusion`` (``"mean"``, ``"max"``, ``"min"``), the identity added with ``residual``,
    layers from ``start_layer``; ``key_padding_mask (B, L)`` (True = padding) zeroes padding's rows and columns."""
    batch, length, dtype, real = _prepare(weights, start_layer, key_padding_mask)
    rollout = torch.eye(length, dtype=dtype, device=weights[0].device).expand(batch, length, length)
    rollout = rollout.clone() if real is None else rollout * real[:, :, None]
    for layer in weights[start_layer:]:
        rollout = _transition(layer, dtype, residual, head_fusion, real) @ rollout
    return rollout


def rollout_rows(weights: Sequence[Tensor], rows: int | Sequence[int] = 0, *, residual: bool = True,
                 head_fusion: str = "mean", start_layer: int = 0, key_padding_mask: Tensor | None = None) -> Tensor:
    """``attention_rollout(...)[:, rows]`` (same arguments) by propagating one-hot rows backward, O(R·L²) per layer:
    ``(B, L)`` for an ``int`` row, ``(B, R, L)`` for ``R`` rows (``rows=0`` for [CLS])."""
    batch, length, dtype, real = _prepare(weights, start_layer, key_padding_mask)
    single = isinstance(rows, int)
    index = torch.as_tensor([rows] if single else list(rows), dtype=torch.long)
    if index.dim() != 1 or index.numel() == 0 or bool(((index < 0) | (index >= length)).any()):
        raise UserInputError(f"rows must be token indices in [0, {length - 1}], got {rows!r}")
    device = weights[0].device
    selected = torch.zeros(len(index), length, dtype=dtype, device=device)
    selected[torch.arange(len(index)), index.to(device)] = 1.0
    selected = selected.expand(batch, -1, -1)  # (B, R, L)
    for layer in reversed(weights[start_layer:]):
        selected = selected @ _transition(layer, dtype, residual, head_fusion, real)
    if real is not None:
        selected = selected * real[:, None, :]
    return selected[:, 0] if single else selected


def rollout_row_from_queries(queries_keys: Sequence[tuple[Tensor, Tensor]], row: int = 0, *, residual: bool = True,
                             head_fusion: str = "mean", start_layer: int = 0, chunk_size: int | None = 256) -> Tensor:
    """Row ``row`` ``(B, L)`` of :func:`attention_rollout` for unpadded inputs from each layer's ``(q, k)``
    (``(B, H, L, Dh)``, ``q`` already scaled), recomputing attention ``chunk_size`` query rows at a time; the other
    arguments as in :func:`rollout_rows`."""
    if head_fusion not in HEAD_FUSIONS:
        raise UserInputError(f"head_fusion must be one of {HEAD_FUSIONS}, got {head_fusion!r}")
    if not 0 <= start_layer < len(queries_keys):
        raise UserInputError(f"start_layer must be in [0, {len(queries_keys) - 1}], got {start_layer}")
    q0 = queries_keys[0][0]
    batch, length, device = q0.shape[0], q0.shape[2], q0.device
    selected = torch.zeros(batch, 1, length, 1, dtype=torch.float32, device=device)
    selected[:, 0, row] = 1.0
    query_index = torch.arange(length, device=device).view(1, 1, length)
    for q, k in reversed(queries_keys[start_layer:]):
        def spread(q_rows: Tensor, weight_rows: Tensor, index: Tensor, keys: Tensor = k) -> Tensor:
            """What rows ``index`` of this layer's transition pass on: ``(B, c)`` weights → ``(B, L)``."""
            fused = fuse_heads((q_rows.float() @ keys.float().transpose(-1, -2)).softmax(dim=-1), head_fusion)
            if residual:
                fused.scatter_add_(-1, index.reshape(1, -1, 1).expand(batch, -1, 1), torch.ones_like(fused[..., :1]))
            fused = fused / fused.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(fused.dtype).tiny)
            return (weight_rows[:, 0] * fused).sum(dim=1)

        selected = apply_in_chunks(spread, q, selected, query_index, chunk_size=chunk_size, dim=2, reduce="sum")
        selected = selected[:, None, :, None]
    return selected[:, 0, :, 0]
