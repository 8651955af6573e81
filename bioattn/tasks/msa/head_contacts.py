"""Which row-attention heads of :class:`~bioattn.models.msa_contact.MSAContactModel` carry residue contacts."""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from bioattn.coevolution import apc, symmetrize
from bioattn.metrics import LONG_RANGE, PRECISION_NAMES, TOP_FRACTIONS, precision_at


@torch.no_grad()
def row_attention_maps(model: torch.nn.Module, tokens: Tensor) -> Tensor:
    """Tied row attention: ``tokens (N, L)`` → ``(layers, H, L, L)``; the model is put in eval mode."""
    model.eval()
    _, maps = model(tokens[None].to(next(model.parameters()).device), need_weights=True)
    return maps[0].float().cpu()


def head_contact_precision(maps: Tensor, distances: np.ndarray, *, min_separation: int = LONG_RANGE) -> np.ndarray:
    """``maps (layers, H, L, L)``, ``distances (L, L)`` → ``(layers, H, 3)``: P@L/5, P@L/2, P@L of each symmetrised +
    APC map."""
    corrected = apc(symmetrize(maps.float())).cpu().numpy()
    layers, heads = corrected.shape[:2]
    result = np.empty((layers, heads, len(PRECISION_NAMES)))
    for layer in range(layers):
        for head in range(heads):
            scores = precision_at(corrected[layer, head], distances, min_separation=min_separation)
            result[layer, head] = [scores[name] for name in PRECISION_NAMES]
    return result
