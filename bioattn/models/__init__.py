"""The shipped pretrained models and the loader every task shares (``load_pretrained("gue-prom-core-all")``,
:class:`AutoModel`, :func:`available_models`, :func:`model_card`).

Importing this package imports neither torch nor any model (``bioattn models`` lists the shipped cards in a
fraction of a second). Each model lives in its own module and is imported from there: ``from
bioattn.models.promoter import PromoterClassifier``, ``from bioattn.models.ensemble import Ensemble``,
``from bioattn.models.base import PretrainedModel``, ``from bioattn.models.factored_attention import
FactoredAttention``; :func:`load_pretrained` picks the class a saved ``config.json`` names from the tasks'
model classes (:data:`bioattn.plugins.TASKS`, a table of strings below this package).
"""
from __future__ import annotations

from bioattn.models.registry import AutoModel, available_models, load_pretrained, model_card

__all__ = ["AutoModel", "available_models", "load_pretrained", "model_card"]
