"""Per-head statistics of attention maps: how similar the heads of one layer are to each other."""
from __future__ import annotations

import torch
from torch import Tensor

from bioattn.errors import UserInputError


def head_diversity(weights_layer: Tensor) -> Tensor:
    """``(H, L, L)`` or ``(B, H, L, Lk)`` (batch-averaged) → ``(H, H)`` cosine similarity between heads."""
    if weights_layer.dim() == 3:
        weights_layer = weights_layer[None]
    if weights_layer.dim() != 4:
        raise UserInputError("head_diversity expects one layer's map, (H, L, L) or (B, H, L, L); got shape "
                             f"{tuple(weights_layer.shape)}")
    flat = weights_layer.detach().flatten(start_dim=2).float()  # (B, H, L*Lk)
    unit = torch.nn.functional.normalize(flat, dim=-1)
    return (unit @ unit.transpose(1, 2)).mean(dim=0)
