"""Explanations for attention models: attribution maps whose faithfulness is measured, per-head maps, head
diversity and head sharpness.

Rollout treats attention as the only path between tokens: it is a hypothesis generator, not a causal
attribution. It is computed in :mod:`bioattn.attention.rollout` (the models use it too) and re-exported here.
:func:`attribute` gives every model's map by any method of :data:`METHODS` (rollout, gradient-weighted
relevance, Captum's Integrated Gradients and gradient × input, random); :mod:`bioattn.explain.faithfulness`
measures how faithful a map is (deletion / insertion curves); :mod:`bioattn.explain.sharpness` gives per-head
entropy and effective temperature. :func:`attribute` (it imports the models) and the figure functions (modules
:mod:`bioattn.explain.figures` and :mod:`bioattn.explain.faithfulness_figures`, which import matplotlib) are
loaded only when first used.

From Python, :func:`explain_promoter`, :func:`explain_ct` and :func:`explain_msa` run the whole explanation of
``bioattn explain promoter|ct|msa`` (a model object, shipped name or run directory + inputs as paths or in memory)
and return a result with the maps, tables and summary; its ``save(directory)`` writes what the command writes
(``explain_ct`` lives in :mod:`bioattn.explain.ct_report`, loaded when first used: it reads a run's preprocessing).

Motifs: :func:`explain_motifs` (in-silico mutagenesis :func:`ism_attribution`, TF-MoDISco, TOMTOM against JASPAR
or a MEME file via :func:`load_motif_database`, and :func:`head_motif_enrichment`, which head reads which
pattern) and :func:`write_motif_report` (``motifs.html``, ``motifs.tsv``, logos, position histograms);
:func:`marginalize_known_motifs` plants named sites (e.g. :func:`jaspar_consensus` of core-promoter factors) and
their shuffles into background sequences and measures the change of the prediction; also loaded when first used.
"""
from __future__ import annotations

import importlib
from typing import Any

from bioattn.explain.attribution import METHODS
from bioattn.explain.faithfulness import compare_methods, evaluate_faithfulness
from bioattn.explain.heads import head_diversity
from bioattn.explain.sharpness import head_sharpness
from bioattn.attention.rollout import HEAD_FUSIONS, attention_rollout, fuse_heads, rollout_rows

_FIGURES = (
    "plot_head_maps", "plot_head_diversity", "plot_head_scores", "plot_rollout_track", "plot_orthogonal_slices",
    "plot_contact_map",
)
_FAITHFULNESS_FIGURES = ("plot_faithfulness_curves", "plot_head_sharpness")
_MOTIFS = {
    "explain_motifs": "bioattn.explain.motifs", "discover_patterns": "bioattn.explain.motifs",
    "write_motif_report": "bioattn.explain.motif_report", "load_motif_database": "bioattn.explain.motif_db",
    "ism_attribution": "bioattn.explain.ism", "head_motif_enrichment": "bioattn.explain.head_motifs",
    "cls_attention": "bioattn.explain.head_motifs",
    "marginalize_known_motifs": "bioattn.explain.marginalize", "jaspar_consensus": "bioattn.explain.marginalize",
}

_PIPELINES = {
    "explain_promoter": "bioattn.explain.promoter_report", "PromoterExplanation": "bioattn.explain.promoter_report",
    "explain_ct": "bioattn.explain.ct_report", "CTExplanation": "bioattn.explain.ct_report",
    "explain_msa": "bioattn.explain.msa_report", "MSAExplanation": "bioattn.explain.msa_report",
}

__all__ = [*_PIPELINES, "HEAD_FUSIONS", "METHODS", "attention_rollout", "attribute", "compare_methods", "evaluate_faithfulness",
           "fuse_heads", "rollout_rows", "head_diversity", "head_sharpness", *_FIGURES, *_FAITHFULNESS_FIGURES,
           *_MOTIFS]


def __getattr__(name: str) -> Any:
    if name in _FIGURES:
        return getattr(importlib.import_module("bioattn.explain.figures"), name)
    if name in _FAITHFULNESS_FIGURES:
        return getattr(importlib.import_module("bioattn.explain.faithfulness_figures"), name)
    if name in _PIPELINES:  # import the models (and MONAI): loaded when first used
        return getattr(importlib.import_module(_PIPELINES[name]), name)
    if name in _MOTIFS:
        return getattr(importlib.import_module(_MOTIFS[name]), name)
    if name == "attribute":  # imports the three models (and MONAI): loaded when first used
        return importlib.import_module("bioattn.explain.dispatch").attribute
    raise AttributeError(f"module 'bioattn.explain' has no attribute {name!r}")
