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

from bioattn.commands.common import (
    add_device_argument, add_explain_arguments, add_method_arguments, add_model_arguments, method_options, model_source,
)
from bioattn.commands.vocabulary import add_alias
from bioattn.explain.attribution import PROMOTER_METHODS
from bioattn.explain.motif_db import DEFAULT_DB, DEFAULT_Q
from bioattn.explain.motifs import DEFAULT_ATTRIBUTION, DEFAULT_USE, MOTIF_ATTRIBUTIONS, MOTIF_USES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser, trained_by="bioattn train promoter")
    add_device_argument(parser)
    add_explain_arguments(parser, input_help="FASTA or CSV (column 'sequence', optional 'id'), plain or gzip")
    rows = parser.add_argument("--max-rows", type=int, default=1000, help="explain at most this many records (default: 1000)")
    add_alias(parser, rows, "--max-sequences", "--max-seqs")
    parser.add_argument("--plot-sequences", type=int, default=6, help="write a track PNG for the first N records (default: 6)")
    parser.add_argument("--batch-size", type=int, default=64, help="sequences per forward pass (default: %(default)s)")
    parser.add_argument("--tss-index", type=int, default=None,
                        help="0-based index of the TSS in every sequence; positions are then reported relative to it "
                             "(TSS = 0). GUE prom_core_* (70 bp): 34, see the explain docs")
    parser.add_argument("--motif", default="TATAWAWR",
                        help="IUPAC motif whose influence is compared with the sequence mean (default: TATAWAWR, "
                             "the TATA box); '' to skip")
    parser.add_argument("--mark", action="append", default=[], metavar="LABEL=START..END",
                        help="shade a range on the profile plot, in reported coordinates, e.g. 'TATA box=-31..-24'; "
                             "repeat for several (default: none)")
    parser.add_argument("--strand", choices=("model", "both", "forward"), default="model",
                        help="rollout of the forward strand, of both strands averaged, or as the model predicts (default)")
    add_method_arguments(parser, unit="nucleotides", methods=PROMOTER_METHODS)
    parser.add_argument("--faithfulness-sequences", type=int, default=200,
                        help="measure faithfulness on the first N records (default: %(default)s)")
    motifs = parser.add_argument_group("motifs")
    motifs.add_argument("--motifs", action="store_true",
                        help="also discover the motifs the model uses (hypothetical contributions of --motif-attribution + TF-MoDISco over all "
                             "records, which must share one length), match them against --motif-db with TOMTOM and "
                             "measure which attention head reads each; writes motifs.html, motifs.tsv, logos/, "
                             "positions/, head_motifs.tsv (default: off)")
    motifs.add_argument("--motif-db", default=DEFAULT_DB, metavar="DB",
                        help="known motifs for --motifs: jaspar (JASPAR2026 CORE vertebrates, shipped with pyjaspar), "
                             "jaspar:COLLECTION:TAX_GROUP (e.g. jaspar:CORE:insects, jaspar:CORE:all), a MEME-format "
                             "file, or none (default: %(default)s)")
    motifs.add_argument("--motif-target", choices=("positive", "predicted"), default="positive",
                        help="what --motifs explains: the log-odds of the positive class in every sequence (two-class "
                             "models), or of each sequence's predicted class (default: %(default)s)")
    motifs.add_argument("--motif-attribution", choices=MOTIF_ATTRIBUTIONS, default=DEFAULT_ATTRIBUTION,
                        help="hypothetical contributions --motifs clusters, independent of --method: "
                             "integrated_gradients (Integrated Gradients path gradients read for every base; an "
                             "ensemble's mean) or ism (every substitution scored by the model) (default: %(default)s)")
    motifs.add_argument("--motif-sequences", choices=MOTIF_USES, default=DEFAULT_USE,
                        help="which records --motifs explains and clusters: all, or predicted_positive (two-class "
                             "models: the records predicted positive) (default: %(default)s)")
    motifs.add_argument("--motif-q", type=float, default=DEFAULT_Q,
                        help="TOMTOM q-value below which a pattern is reported as matching a known motif "
                             "(default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    from bioattn.explain.promoter_report import describe, explain_promoter
    from bioattn.explain.result import check_out_dir

    check_out_dir(args.out, overwrite=args.overwrite)
    result = explain_promoter(
        model_source(args), args.input, strand=args.strand, head_fusion=args.head_fusion, start_layer=args.start_layer,
        max_rows=args.max_rows, batch_size=args.batch_size, tss_index=args.tss_index, motif=args.motif,
        marks=args.mark, plot_sequences=args.plot_sequences, faithfulness_sequences=args.faithfulness_sequences,
        motifs=args.motifs, motif_db=args.motif_db, motif_target=args.motif_target, motif_q=args.motif_q,
        motif_attribution=args.motif_attribution, motif_sequences=args.motif_sequences,
        device=args.device, **method_options(args))
    out = result.save(args.out, overwrite=args.overwrite)
    print(f"explained {result.summary['sequences']} sequences with {result.method} -> {out}")
    if args.motifs:
        found = result.summary["motifs"]
        print(f"motifs: {found['patterns']} patterns, {found['matched']} matching {found['database']} at q < "
              f"{found['q_threshold']:g} ({found['families']} TF families) -> {out / 'motifs.html'}")
    report = describe(result)
    if report:
        print(report)
    return 0
