"""The model machinery every task shares: :class:`PretrainedModel` (save / load / ``from_pretrained``),
:class:`Ensemble`, :class:`FactoredAttention` and the shipped pretrained models (``load_pretrained("gue-prom-core-all")``,
:class:`AutoModel`, :func:`available_models`, :func:`model_card`).

Each task's model lives in its own module and is imported from there (``from bioattn.models.promoter import
PromoterClassifier``); :func:`load_pretrained` picks the class a saved ``config.json`` names from the tasks'
``model_types`` (:mod:`bioattn.tasks.registry`), so importing this package imports no task's model.
"""
from __future__ import annotations

from bioattn.models.base import PretrainedModel
from bioattn.models.ensemble import Ensemble
from bioattn.models.factored_attention import FactoredAttention
from bioattn.models.registry import AutoModel, available_models, load_pretrained, model_card

__all__ = ["AutoModel", "Ensemble", "FactoredAttention", "PretrainedModel", "available_models", "load_pretrained",
           "model_card"]
