"""What an activity model reads in each sequence: per-nucleotide attributions (ISM or gradients), motifs, known-motif weights.

    bioattn explain activity --model RUN_DIR_OR_NAME --input seqs.fa|.csv|.tsv --out DIR [--motifs]

Works on every run directory of 'bioattn train activity' (one run, --seeds, the default cross-validation ensemble,
explained as it predicts: the mean of its members) and on a shipped activity model. Writes, under --out:
``predictions.tsv`` (id, length, one value per target and, for an ensemble, the members' sd); ``attribution.tsv``
(one row per nucleotide of the element, flanks removed); ``attribution_profile.tsv``/``.png`` (mean and sd per
position, and the mean over the sequences predicted above / below the median); ``tracks/`` (one PNG per sequence
for the first --plot-sequences); ``known_motif_weights.tsv`` (the known-motif features the model weighs most; an
ensemble's mean, sd and per-member weights); ``summary.json`` (with ``faithfulness``: every method's
deletion/insertion AUC, nucleotides replaced by N, the curves following the value's departure from the all-N
sequence's); ``faithfulness.png``; with --motifs the motif report (motifs.html, motifs.tsv, logos/, positions/).

--method: ism (in-silico mutagenesis of the whole model, known-motif branch included), integrated_gradients or
gradient_x_input (Captum, on the embeddings: the deep part of the model only), random; auto (default) measures the
faithfulness of those fast enough on the first 16 records and takes the most faithful, saying so on stderr.
"""
from __future__ import annotations

import argparse

from bioattn.commands.common import (
    add_explain_arguments, add_method_arguments, add_model_and_device_arguments, method_options, model_source,
)

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from bioattn.explain.motif_db import DEFAULT_DB, DEFAULT_Q
    from bioattn.tasks.activity.explain import ACTIVITY_METHODS, KNOWN_MOTIF_WEIGHTS

    add_model_and_device_arguments(parser, trained_by="bioattn train activity")
    add_explain_arguments(parser, input_help="FASTA or CSV/TSV with a 'sequence' (or 'seq') column and optional 'id', "
                                             "with or without the run's flanks", rollout=False)
    parser.add_argument("--target", default=None, metavar="NAME",
                        help="the output explained, for a model of several targets (default: the first)")
    parser.add_argument("--strand", choices=["forward", "both"], default=None,
                        help="override the run's strand setting (default: the run's)")
    parser.add_argument("--max-rows", type=int, default=1000, help="explain at most this many records (default: %(default)s)")
    parser.add_argument("--plot-sequences", type=int, default=6, help="write a track PNG for the first N records (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=64, help="sequences per pass (default: %(default)s)")
    add_method_arguments(parser, unit="nucleotides", methods=ACTIVITY_METHODS)
    parser.add_argument("--faithfulness-sequences", type=int, default=32,
                        help="measure faithfulness on the first N records (default: %(default)s; every method runs on "
                             "them, ism included, which scores 3 edits per nucleotide: seconds per 200-nt record on a CPU)")
    parser.add_argument("--known-motif-weights", type=int, default=KNOWN_MOTIF_WEIGHTS, metavar="N",
                        help="list the N known-motif features the model weighs most (default: %(default)s; 0: none)")
    motifs = parser.add_argument_group("motifs")
    motifs.add_argument("--motifs", action="store_true",
                        help="also discover the motifs the model uses: in-silico mutagenesis hypothetical "
                             "contributions of every record (elements of one length) clustered by TF-MoDISco and "
                             "matched against --motif-db with TOMTOM; writes motifs.html, motifs.tsv, logos/ and "
                             "positions/ (default: off)")
    motifs.add_argument("--motif-db", default=DEFAULT_DB, metavar="DB",
                        help="known motifs for --motifs: jaspar (JASPAR2026 CORE vertebrates, shipped with pyjaspar), "
                             "jaspar:COLLECTION:TAX_GROUP, a MEME-format file, or none (default: %(default)s)")
    motifs.add_argument("--motif-q", type=float, default=DEFAULT_Q,
                        help="TOMTOM q-value below which a pattern matches a known motif (default: %(default)s)")
    motifs.add_argument("--no-motif-background", dest="motif_background", action="store_false",
                        help="skip the composition control of --motifs (the same pipeline on a dinucleotide shuffle "
                             "of every record; its patterns are flagged as composition) (default: motif_background=%(default)s)")


def run(args: argparse.Namespace) -> int:
    from bioattn.tasks.activity.explain import describe, explain_activity

    result = explain_activity(
        model_source(args), args.input, target=args.target, strand=args.strand, max_rows=args.max_rows,
        batch_size=args.batch_size, plot_sequences=args.plot_sequences,
        faithfulness_sequences=args.faithfulness_sequences, known_motif_weights=args.known_motif_weights,
        motifs=args.motifs, motif_db=args.motif_db, motif_q=args.motif_q, motif_background=args.motif_background,
        device=args.device, out=args.out, overwrite=args.overwrite, **method_options(args))
    print(describe(result))
    return 0
