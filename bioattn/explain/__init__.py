"""Method-generic explanations for attention models: attribution maps whose faithfulness is measured, per-head
maps, head diversity and head sharpness. Nothing here names a task; each task's pipeline builds on it.

Rollout treats attention as the only path between tokens: it is a hypothesis generator, not a causal
attribution. It is computed in :mod:`bioattn.attention.rollout` (the models use it too) and re-exported here.
:mod:`bioattn.explain.attribution` holds the methods every model explains with (:data:`METHODS`: rollout,
gradient-weighted relevance, Captum's Integrated Gradients and gradient × input, random) and their costs;
:mod:`bioattn.explain.faithfulness` measures how faithful a map is (deletion / insertion curves);
:mod:`bioattn.explain.sharpness` gives per-head entropy and effective temperature. Figures:
:mod:`bioattn.explain.figures` and :mod:`bioattn.explain.faithfulness_figures`.

Each task's whole explanation (what ``bioattn explain TASK`` runs, from Python: a model object, shipped name or
run directory + inputs as paths or in memory, returning a result whose ``save(directory)`` writes what the command
writes) is ``explain`` in its task folder (:mod:`bioattn.tasks.promoter.explain`, :mod:`bioattn.tasks.ct.explain`,
:mod:`bioattn.tasks.msa.explain`, :mod:`bioattn.tasks.activity.explain`);
:func:`bioattn.tasks.explain_dispatch.explain_pipeline` returns it by task name
(``explain_pipeline("ct")(model, volumes)``) and :func:`bioattn.tasks.explain_dispatch.attribute` gives any model's
map by the attribution function of its task.

Motifs: :func:`explain_motifs` (in-silico mutagenesis :func:`ism_attribution`, TF-MoDISco, TOMTOM against JASPAR
or a MEME file via :func:`load_motif_database`, and :func:`head_motif_enrichment`, which head reads which
pattern) and :func:`write_motif_report` (``motifs.html``, ``motifs.tsv``, logos, position histograms);
:func:`marginalize_known_motifs` plants named sites (e.g. :func:`jaspar_consensus` of core-promoter factors) and
their shuffles into background sequences and measures the change of the prediction.
"""
from __future__ import annotations

from bioattn.attention.rollout import HEAD_FUSIONS, attention_rollout, fuse_heads, rollout_rows
from bioattn.explain.attribution import METHODS
from bioattn.explain.faithfulness import compare_methods, evaluate_faithfulness
from bioattn.explain.faithfulness_figures import plot_faithfulness_curves, plot_head_sharpness
from bioattn.explain.figures import (plot_head_diversity, plot_head_maps, plot_head_scores, plot_orthogonal_slices,
                                     plot_rollout_track)
from bioattn.explain.head_motifs import cls_attention, head_motif_enrichment
from bioattn.explain.heads import head_diversity
from bioattn.explain.ism import ism_attribution
from bioattn.explain.marginalize import jaspar_consensus, marginalize_known_motifs
from bioattn.explain.motif_db import load_motif_database
from bioattn.explain.motif_report import write_motif_report
from bioattn.explain.motifs import discover_patterns, explain_motifs
from bioattn.explain.sharpness import head_sharpness

__all__ = ["HEAD_FUSIONS", "METHODS", "attention_rollout", "cls_attention", "compare_methods", "discover_patterns",
           "evaluate_faithfulness", "explain_motifs", "fuse_heads", "head_diversity", "head_motif_enrichment",
           "head_sharpness", "ism_attribution", "jaspar_consensus", "load_motif_database", "marginalize_known_motifs",
           "plot_faithfulness_curves", "plot_head_diversity", "plot_head_maps", "plot_head_scores",
           "plot_head_sharpness", "plot_orthogonal_slices", "plot_rollout_track", "rollout_rows", "write_motif_report"]
