"""Explanations for attention models: attribution maps whose faithfulness is measured, per-head maps, head
diversity and head sharpness.

Rollout treats attention as the only path between tokens: it is a hypothesis generator, not a causal
attribution. It is computed in :mod:`bioattn.attention.rollout` (the models use it too) and re-exported here.
:func:`attribute` gives every model's map by any method of :data:`METHODS` (rollout, gradient-weighted
relevance, Captum's Integrated Gradients and gradient × input, random) through the attribution function of the
model's task; :mod:`bioattn.explain.faithfulness` measures how faithful a map is (deletion / insertion curves);
:mod:`bioattn.explain.sharpness` gives per-head entropy and effective temperature. Figures:
:mod:`bioattn.explain.figures` and :mod:`bioattn.explain.faithfulness_figures`.

Each task's whole explanation (what ``bioattn explain TASK`` runs, from Python: a model object, shipped name or
run directory + inputs as paths or in memory, returning a result whose ``save(directory)`` writes what the command
writes) is named by its task's ``explain`` attribute; :func:`explain_pipeline` returns it
(``explain_pipeline("ct")(model, volumes)``), or import it from its module (:mod:`bioattn.explain.promoter_report`,
:mod:`bioattn.explain.ct_report`, :mod:`bioattn.explain.msa_report`).

Motifs: :func:`explain_motifs` (in-silico mutagenesis :func:`ism_attribution`, TF-MoDISco, TOMTOM against JASPAR
or a MEME file via :func:`load_motif_database`, and :func:`head_motif_enrichment`, which head reads which
pattern) and :func:`write_motif_report` (``motifs.html``, ``motifs.tsv``, logos, position histograms);
:func:`marginalize_known_motifs` plants named sites (e.g. :func:`jaspar_consensus` of core-promoter factors) and
their shuffles into background sequences and measures the change of the prediction.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable

from bioattn.attention.rollout import HEAD_FUSIONS, attention_rollout, fuse_heads, rollout_rows
from bioattn.explain.attribution import METHODS
from bioattn.explain.dispatch import attribute
from bioattn.explain.faithfulness import compare_methods, evaluate_faithfulness
from bioattn.explain.faithfulness_figures import plot_faithfulness_curves, plot_head_sharpness
from bioattn.explain.figures import (
    plot_contact_map,
    plot_head_diversity,
    plot_head_maps,
    plot_head_scores,
    plot_orthogonal_slices,
    plot_rollout_track,
)
from bioattn.explain.head_motifs import cls_attention, head_motif_enrichment
from bioattn.explain.heads import head_diversity
from bioattn.explain.ism import ism_attribution
from bioattn.explain.marginalize import jaspar_consensus, marginalize_known_motifs
from bioattn.explain.motif_db import load_motif_database
from bioattn.explain.motif_report import write_motif_report
from bioattn.explain.motifs import discover_patterns, explain_motifs
from bioattn.explain.sharpness import head_sharpness
from bioattn.tasks.registry import get_task


def explain_pipeline(task: str) -> Callable[..., Any]:
    """The whole explanation of the registered task ``task`` (its ``explain`` function, imported now)."""
    target = get_task(task).explain
    if target is None:
        raise ValueError(f"task {task!r} has no explain pipeline")
    module_name, function = target.split(":")
    return getattr(importlib.import_module(module_name), function)


__all__ = [
    "HEAD_FUSIONS", "METHODS", "attention_rollout", "attribute", "cls_attention", "compare_methods",
    "discover_patterns", "evaluate_faithfulness", "explain_motifs", "explain_pipeline", "fuse_heads",
    "head_diversity", "head_motif_enrichment", "head_sharpness", "ism_attribution", "jaspar_consensus",
    "load_motif_database", "marginalize_known_motifs", "plot_contact_map", "plot_faithfulness_curves",
    "plot_head_diversity", "plot_head_maps", "plot_head_scores", "plot_head_sharpness", "plot_orthogonal_slices",
    "plot_rollout_track", "rollout_rows", "write_motif_report",
]
