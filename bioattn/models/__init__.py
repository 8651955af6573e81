"""The shipped pretrained models and the loader every task shares (:func:`load_pretrained`, :class:`AutoModel`,
:func:`available_models`, :func:`model_card`).

Importing this package imports neither torch nor any model; each model is imported from its own module, e.g.
``from bioattn.models.promoter import PromoterClassifier``.
"""
from __future__ import annotations

from bioattn.models.registry import AutoModel, available_models, load_pretrained, model_card

__all__ = ["AutoModel", "available_models", "load_pretrained", "model_card"]
