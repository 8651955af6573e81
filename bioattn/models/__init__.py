"""The bioattn models, ensembles of them and the shipped pretrained ones (``load_pretrained("gue-prom-core-all")``).
Imported lazily so ``import bioattn.models`` stays cheap."""
from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "PretrainedModel": "bioattn.models.base",
    "PromoterClassifier": "bioattn.models.promoter",
    "ActivityRegressor": "bioattn.models.activity",
    "MSAContactModel": "bioattn.models.msa_contact",
    "MSATransformer": "bioattn.models.msa_transformer",
    "HybridCT3D": "bioattn.models.hybrid_ct",
    "Ensemble": "bioattn.models.ensemble",
    "FactoredAttention": "bioattn.models.factored_attention",
    "AutoModel": "bioattn.models.registry",
    "load_pretrained": "bioattn.models.registry",
    "available_models": "bioattn.models.registry",
    "model_card": "bioattn.models.registry",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'bioattn.models' has no attribute {name!r}")
