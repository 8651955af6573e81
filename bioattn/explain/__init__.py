"""Method-generic explanations for attention models: attribution maps, their faithfulness, per-head statistics."""
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
