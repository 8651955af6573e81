"""Explanations for attention models: attention rollout, per-head maps and head diversity.

Rollout treats attention as the only path between tokens: it is a hypothesis generator, not a causal
attribution. It is computed in :mod:`bioattn.attention.rollout` (the models use it too) and re-exported here. The figure functions (module :mod:`bioattn.explain.figures`) import matplotlib, so they are
loaded only when first used.
"""
from __future__ import annotations

import importlib
from typing import Any

from bioattn.explain.heads import head_diversity
from bioattn.attention.rollout import HEAD_FUSIONS, attention_rollout, fuse_heads, rollout_rows

_FIGURES = (
    "plot_head_maps", "plot_head_diversity", "plot_head_scores", "plot_rollout_track", "plot_orthogonal_slices",
    "plot_contact_map",
)

__all__ = ["HEAD_FUSIONS", "attention_rollout", "fuse_heads", "rollout_rows", "head_diversity", *_FIGURES]


def __getattr__(name: str) -> Any:
    if name in _FIGURES:
        return getattr(importlib.import_module("bioattn.explain.figures"), name)
    raise AttributeError(f"module 'bioattn.explain' has no attribute {name!r}")
