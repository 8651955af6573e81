"""The flags of ``bioattn explain promoter`` (those every explain command shares are in
:mod:`bioattn.commands.common`); apart from the training flags, so that the command reaches no training code."""
from __future__ import annotations

import argparse

from bioattn.commands.common import (
    add_explain_arguments as add_common_explain_arguments, add_method_arguments, add_model_and_device_arguments,
)


def add_promoter_explain_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``bioattn explain promoter``."""
    from bioattn.explain.motif_db import DEFAULT_DB, DEFAULT_Q
    from bioattn.explain.motifs import DEFAULT_ATTRIBUTION, DEFAULT_USE, MOTIF_ATTRIBUTIONS, MOTIF_USES
    from bioattn.tasks.promoter.attribution import PROMOTER_METHODS

    add_model_and_device_arguments(parser, trained_by="bioattn train promoter")
    add_common_explain_arguments(parser, input_help="FASTA or CSV (column 'sequence', optional 'id'), plain or gzip")
    parser.add_argument("--max-rows", type=int, default=1000, help="explain at most this many records (default: 1000)")
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
                             "positions/, head_motifs.tsv, motif_spacings.tsv and motif_scan_spacings.tsv (spacers "
                             "between patterns from seqlets and from scans of every sequence) (default: off)")
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
    motifs.add_argument("--no-motif-background", dest="motif_background", action="store_false",
                        help="skip the composition control of --motifs (by default the same pipeline also runs on a "
                             "dinucleotide shuffle of every record, and patterns it yields too are flagged as "
                             "composition, not listed as findings; it about doubles the time) (default: motif_background=%(default)s)")
    motifs.add_argument("--known-motifs", type=int, default=0, metavar="N",
                        help="plant the JASPAR consensus of core-promoter factors (TBP, SP1, NF-Y, ETS: ELK1 and "
                             "GABPA, NRF1, YY1, CREB1, ZNF143, E2F1; CTCF as a control) centred at -30, -20, -10, 0, "
                             "+10 and +20 nt from --tss-index into dinucleotide shuffles of the first N records, and "
                             "3 shuffles of each motif's letters at the same place; writes known_motifs.tsv with the "
                             "change of the positive-class log-odds, motif minus shuffles (default: 0, off)")


# --------------------------------------------------------------------------------------------------- explain msa
