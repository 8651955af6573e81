"""One entry point for every model: ``attribute(model, inputs, method)`` picks the model's attribution function."""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from bioattn.data.dna import PAD_ID
from bioattn.explain.ct_attribution import volume_attribution
from bioattn.explain.msa_attribution import msa_attribution
from bioattn.explain.promoter_attribution import promoter_attribution
from bioattn.models import HybridCT3D, MSAContactModel, PromoterClassifier
from bioattn.models.ensemble import ensemble_members


def attribute(model: torch.nn.Module, inputs: Tensor, method: str, **options: Any) -> Tensor:
    """The ``method`` map (one of :data:`~bioattn.explain.attribution.METHODS`) of a model or an ensemble of them.

    - :class:`~bioattn.models.PromoterClassifier`: ``inputs`` token ids ``(B, L)`` (``PAD`` = padding) → ``(B, L)``;
    - :class:`~bioattn.models.HybridCT3D`: volumes ``(B, C, D, H, W)`` → ``(B, D, H, W)``;
    - :class:`~bioattn.models.MSAContactModel`: one alignment's tokens ``(N, L)`` → ``(L,)``.

    ``options`` go to :func:`~bioattn.explain.promoter_attribution.promoter_attribution`,
    :func:`~bioattn.explain.ct_attribution.volume_attribution` or :func:`~bioattn.explain.msa_attribution.msa_attribution`.
    """
    kind = ensemble_members(model)[0]
    if isinstance(kind, PromoterClassifier):
        return promoter_attribution(model, inputs, inputs == PAD_ID, method, **options)
    if isinstance(kind, HybridCT3D):
        return volume_attribution(model, inputs, method, **options)
    if isinstance(kind, MSAContactModel):
        return msa_attribution(model, inputs, method, **options)
    raise TypeError(f"no attribution for {type(kind).__name__}; expected PromoterClassifier, HybridCT3D or MSAContactModel")
