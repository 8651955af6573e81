"""Fit a variant-effect head on measured variant effects (the CAGI5 supervised protocol), cross-validated.

    bioattn train variants --activity-model NAME_OR_DIR --reference elements.fa --input train_release.vcf --out runs/cagi5

Features of each measured variant come from the activity model (allele differences over window placements and
strands, in-silico mutagenesis around the variant, embedding differences, the reference activity; a deletion,
insertion or multi-base substitution of up to 20 nt is scored in the windows 'bioattn predict variants' cuts for
it, its in-silico mutagenesis read from the SNVs at its POS) plus the mean
measured effect of other release variants nearby (leaving out the variant's own block of positions). A sparse
linear model (ElasticNetCV) is cross-validated within the release, folds grouped by blocks of positions within
each element, beside same-run baselines: the nearby effects alone, the activity model's raw allele difference and
a k-mer ridge's (--kmer-train FILES, e.g. the activity model's training files). Pearson and Spearman per element,
on all and on confident variants (CONF >= 0.1), and their means over promoters and enhancers are written to
OUT/metrics.json and OUT/summary.md; out-of-fold predictions to OUT/out_of_fold.tsv, the features to
OUT/features.tsv. OUT is a run directory that 'bioattn predict variants --model OUT' accepts (it stores the activity model's weights and the release).
Contigs whose FASTA header says gene_strand=- are scored in reverse complement (gene orientation), as an
oriented MPRA reads them (--no-gene-orientation to turn off).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bioattn.commands.common import add_device_argument

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--activity-model", required=True, metavar="NAME_OR_DIR",
                        help="DNA activity model: a shipped model's name or a run directory (default: none)")
    parser.add_argument("--activity-name", default=None, metavar="NAME",
                        help="name the head records for its activity model (default: --activity-model as given)")
    parser.add_argument("--reference", type=Path, required=True, metavar="FASTA",
                        help="sequences of the elements the variants lie on (default: none)")
    parser.add_argument("--input", type=Path, required=True, metavar="VCF_OR_TSV",
                        help="measured variants: VCF with EFFECT (and CONF) INFO fields, or TSV with effect columns "
                             "(default: none)")
    parser.add_argument("--out", type=Path, required=True, help="run directory to create (default: none)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out (default: off)")
    parser.add_argument("--kmer-train", type=Path, nargs="+", default=(), metavar="FILE",
                        help="sequence/value tables to fit the k-mer ridge baseline on (default: no k-mer baseline)")
    parser.add_argument("--folds", type=int, default=5, help="cross-validation folds (default: %(default)s)")
    parser.add_argument("--block", type=int, default=16,
                        help="positions per block; folds never split a block (default: %(default)s)")
    parser.add_argument("--radius", type=int, default=24,
                        help="nearby-effect features read measured variants within this many nt (default: %(default)s)")
    parser.add_argument("--bandwidth", type=float, default=6.0,
                        help="Gaussian bandwidth (nt) of the nearby-effect weights (default: %(default)s)")
    parser.add_argument("--ism-radius", type=int, default=4,
                        help="in-silico mutagenesis features cover this many nt either side (default: %(default)s)")
    parser.add_argument("--strands", choices=("auto", "forward", "both"), default="auto",
                        help="strands of the activity model's windows (default: %(default)s: as the model was trained)")
    parser.add_argument("--gene-orientation", action=argparse.BooleanOptionalAction, default=True,
                        help="score contigs whose FASTA header says gene_strand=- in reverse complement; "
                             "--no-gene-orientation: every contig on its given strand (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fold assignment (default: %(default)s)")
    add_device_argument(parser)


def run(args: argparse.Namespace) -> int:
    from bioattn.tasks.variants.train import VariantTrainOptions, run_train_variants

    options = VariantTrainOptions(activity_model=args.activity_model, activity_name=args.activity_name,
                                  reference=args.reference, input=args.input, out=args.out,
                                  kmer_train=args.kmer_train, folds=args.folds, block=args.block, radius=args.radius,
                                  bandwidth=args.bandwidth, ism_radius=args.ism_radius, strands=args.strands,
                                  gene_orientation=args.gene_orientation, seed=args.seed, overwrite=args.overwrite,
                                  device=args.device)
    print(run_train_variants(options), file=sys.stderr)
    return 0
