"""Gradient-weighted attention relevance (Chefer, Gur & Wolf 2021).

Rollout (:mod:`bioattn.attention.rollout`) multiplies raw attention through the layers and so ignores what the
prediction does with each token. Chefer et al. weight every attention map by the gradient of the explained
output with respect to it, keep the positive part, average over heads and accumulate through the layers with
the residual identity::

    Ā_l = mean_h( (∂y/∂A_l ⊙ A_l)⁺ )        R ← R + Ā_l · R        (R starts at I)

This is the self-attention rule of their "Generic Attention-model Explainability" (ICCV 2021), the
gradient × attention form of "Transformer Interpretability Beyond Attention Visualization" (CVPR 2021) without
the LRP relevance pass that paper combines it with. ``y`` is the predicted class's logit; a row ``R[i]`` says
how much each token contributed to token ``i``'s output (for classification, the [CLS] row).
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor


def relevance_from_attention(attentions: Sequence[Tensor], gradients: Sequence[Tensor], *, start_layer: int = 0) -> Tensor:
    """Accumulate gradient-weighted attention through the layers.

    Args:
        attentions: per layer ``(B, H, L, L)`` attention probabilities.
        gradients: per layer ``(B, H, L, L)``, the gradient of the explained output w.r.t. those probabilities.
        start_layer: first layer included.

    Returns:
        ``(B, L, L)`` relevance ``R`` (float32); ``R[b, i, j]`` = relevance of token ``j`` for token ``i``'s output.
    """
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
    """``∂ output.sum() / ∂ A_l`` for each layer's attention ``A_l`` (which must be the tensors the forward pass
    used, e.g. those returned with ``need_weights=True`` when no row is fully masked)."""
    gradients = torch.autograd.grad(output.sum(), list(attentions), allow_unused=True)
    missing = [index for index, gradient in enumerate(gradients) if gradient is None]
    if missing:
        raise ValueError(f"attention maps of layer(s) {missing} are not part of the forward graph")
    return list(gradients)
