"""Per-nucleotide influence of a trained promoter classifier (PNG + TSV): attention rollout or a gradient method.

Writes, under ``--out``: ``predictions.tsv`` (id, length, probability of the positive class or ``p_<class>``
per class of a multi-class model, predicted label); ``influence.tsv`` (one row per nucleotide: id, position,
relative position, nucleotide, influence); ``tracks/`` (one PNG per sequence for the first
``--plot-sequences``); ``influence_profile.tsv``/``.png`` (mean, sd and s.e.m. band per position over all
sequences, and the mean per predicted class); ``heads_layer{l}.png`` and ``head_diversity_layer{l}.png``;
``summary.json`` (motif enrichment, head similarities, head sharpness, settings, and ``faithfulness``: each
method's deletion/insertion AUC on the first ``--faithfulness-sequences`` records, nucleotides replaced by N);
``faithfulness.png`` and ``head_sharpness.png``.

``--method`` chooses the map (rollout, gradient-weighted relevance, Captum Integrated Gradients or gradient ×
input on the embeddings, random); ``auto`` measures the deletion/insertion faithfulness of the methods fast enough
for the input on its first 16 records, takes the most faithful there and says which, with the AUCs, on stderr.
Figures and tables name the method used. An ensemble's map is the mean of its members' maps.

Works for two-class and multi-class models alike: the rollout follows the [CLS] token, which every class's
logit reads, so one influence track explains the predicted class whichever it is (the gradient methods explain
the predicted class's log-odds). Rollout treats attention as the only path between tokens: a hypothesis
generator, not causal attribution.
"""
from __future__ import annotations

import argparse

from bioattn.commands.common import method_options, model_source
from bioattn.commands.promoter_explain_args import add_promoter_explain_arguments as add_arguments

__all__ = ["add_arguments", "run"]


def run(args: argparse.Namespace) -> int:
    from bioattn.tasks.promoter.explain import describe, explain_promoter

    result = explain_promoter(
        model_source(args), args.input, strand=args.strand, head_fusion=args.head_fusion, start_layer=args.start_layer,
        max_rows=args.max_rows, batch_size=args.batch_size, tss_index=args.tss_index, motif=args.motif,
        marks=args.mark, plot_sequences=args.plot_sequences, faithfulness_sequences=args.faithfulness_sequences,
        motifs=args.motifs, motif_db=args.motif_db, motif_target=args.motif_target, motif_q=args.motif_q,
        motif_attribution=args.motif_attribution, motif_sequences=args.motif_sequences,
        motif_background=args.motif_background,
        known_motifs=args.known_motifs,
        device=args.device, out=args.out, overwrite=args.overwrite, **method_options(args))
    print(describe(result))
    return 0
