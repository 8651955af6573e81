"""Gradient-weighted attention relevance (Chefer, Gur & Wolf 2021), the self-attention rule::

    Ā_l = mean_h( (∂y/∂A_l ⊙ A_l)⁺ )        R ← R + Ā_l · R        (R starts at I)"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor


def relevance_from_attention(attentions: Sequence[Tensor], gradients: Sequence[Tensor], *, start_layer: int = 0) -> Tensor:
    """Per-layer ``attentions``, ``gradients`` ``(B, H, L, L)`` → ``(B, L, L)`` float32 relevance."""
    if len(attentions) != len(gradients) or not attentions:
        raise ValueError(f"need one gradient per attention map (>= 1), got {len(attentions)} and {len(gradients)}")
    if not 0 <= start_layer < len(attentions):
        raise ValueError(f"start_layer must be in [0, {len(attentions) - 1}], got {start_layer}")
    batch, _, length, _ = attentions[0].shape
    relevance = torch.eye(length, device=attentions[0].device).expand(batch, length, length).clone()
    for attention, gradient in list(zip(attentions, gradients))[start_layer:]:
        weighted = (gradient.float() * attention.float()).clamp_min(0).mean(dim=1)  # (B, L, L)
        relevance = relevance + weighted @ relevance
    return relevance


def attention_gradients(output: Tensor, attentions: Sequence[Tensor]) -> list[Tensor]:
    """``∂ output.sum() / ∂ A_l`` for each layer's attention ``A_l`` (the tensors the forward pass used)."""
    gradients = torch.autograd.grad(output.sum(), list(attentions), allow_unused=True)
    missing = [index for index, gradient in enumerate(gradients) if gradient is None]
    if missing:
        raise ValueError(f"attention maps of layer(s) {missing} are not part of the forward graph")
    return list(gradients)
