"""Which attention heads of :class:`~bioattn.models.msa_contact.MSAContactModel` carry residue contacts.

Each layer's tied row attention gives one ``(L, L)`` map per head. A head "carries contacts" when its
symmetrised, average-product-corrected (APC) map ranks true contacts first: its long-range precision at
top-L/k against the native structure (CASP convention, :func:`bioattn.metrics.precision_at`).
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from bioattn.coevolution import apc, symmetrize
from bioattn.metrics import LONG_RANGE, PRECISION_NAMES, TOP_FRACTIONS, precision_at


@torch.no_grad()
def row_attention_maps(model: torch.nn.Module, tokens: Tensor) -> Tensor:
    """Tied row attention of one alignment: ``tokens (N, L)`` → ``(layers, H, L, L)`` (rows = query columns).

    The model is put in eval mode."""
    model.eval()
    _, maps = model(tokens[None].to(next(model.parameters()).device), need_weights=True)
    return maps[0].float().cpu()


def head_contact_precision(maps: Tensor, distances: np.ndarray, *, min_separation: int = LONG_RANGE) -> np.ndarray:
    """Precision of each head's symmetrised + APC map: ``maps (layers, H, L, L)``, ``distances (L, L)`` in Å
    (NaN = no coordinates) → ``(layers, H, len(PRECISION_NAMES))`` (P@L/5, P@L/2, P@L)."""
    corrected = apc(symmetrize(maps.float())).cpu().numpy()
    layers, heads = corrected.shape[:2]
    result = np.empty((layers, heads, len(PRECISION_NAMES)))
    for layer in range(layers):
        for head in range(heads):
            scores = precision_at(corrected[layer, head], distances, min_separation=min_separation)
            result[layer, head] = [scores[name] for name in PRECISION_NAMES]
    return result
