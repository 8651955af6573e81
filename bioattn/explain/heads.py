"""Per-head statistics of attention maps: how similar the heads of one layer are to each other."""
from __future__ import annotations

import torch
from torch import Tensor

from bioattn.errors import UserInputError


def head_diversity(weights_layer: Tensor) -> Tensor:
    """Pairwise cosine similarity between the heads' attention maps of one layer.

    Args:
        weights_layer: ``(H, L, L)`` for one input, or ``(B, H, L, Lk)`` for a batch (similarities are
            computed per input, then averaged over the batch).

    Returns:
        ``(H, H)`` matrix with ones on the diagonal; 1 = two heads attend identically, values near 0 =
        heads look at disjoint positions (maps are non-negative, so the range is [0, 1]). A head whose map
        is all zero has similarity 0 with every head, itself included.
    """
    if weights_layer.dim() == 3:
        weights_layer = weights_layer[None]
    if weights_layer.dim() != 4:
        raise UserInputError(
            f"head_diversity expects one layer's map, (H, L, L) or (B, H, L, L); got shape {tuple(weights_layer.shape)}"
        )
    flat = weights_layer.detach().flatten(start_dim=2).float()  # (B, H, L*Lk)
    unit = torch.nn.functional.normalize(flat, dim=-1)
    return (unit @ unit.transpose(1, 2)).mean(dim=0)
