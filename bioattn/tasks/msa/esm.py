"""The MSA Transformer (ESM-MSA-1b, the user's weights, nothing downloaded) on one alignment."""
from __future__ import annotations

import os
from pathlib import Path

import torch

from bioattn.data.contacts import ContactTarget
from bioattn.errors import UserInputError
from bioattn.models.registry import ESM_MSA_WEIGHTS_HELP
from bioattn.models.msa_transformer import DEFAULT_MAX_ROWS, AlignmentPrediction, MSATransformer

__all__ = ["DEFAULT_MAX_ROWS", "WEIGHTS_HELP", "load_msa_transformer", "esm_msa_prediction"]

#: How to obtain the weights (``bioattn models``, errors, ``--help``).
WEIGHTS_HELP = ESM_MSA_WEIGHTS_HELP

_CACHE: dict[tuple[str, str], MSATransformer] = {}


def load_msa_transformer(weights: str | os.PathLike, device: torch.device | str = "cpu") -> MSATransformer:
    """The MSA Transformer of ``weights`` (a fair-esm ``.pt`` or a converted directory) on ``device``, cached."""
    path = Path(weights)
    key = (str(path.resolve()), str(device))
    if key in _CACHE:
        return _CACHE[key]
    if path.is_dir():
        model = MSATransformer.from_pretrained(path)
        if not isinstance(model, MSATransformer):
            raise UserInputError(f"{path}: holds a {type(model).__name__}, not an MSATransformer")
    elif path.is_file():
        model = MSATransformer.from_esm(path)
    else:
        raise UserInputError(f"{path}: --weights not found. {WEIGHTS_HELP}")
    _CACHE[key] = model.to(device).eval()
    return _CACHE[key]


@torch.no_grad()
def esm_msa_prediction(model: MSATransformer, target: ContactTarget, max_rows: int = DEFAULT_MAX_ROWS) -> AlignmentPrediction:
    """Run ``model`` on at most ``max_rows`` rows of ``target``'s alignment chosen as in ESM's examples."""
    return model.predict_alignment(target.msa.sequences, max_rows, source=str(target.msa.source))
