"""Train the activity regressor (sequence → measured activity, e.g. MPRA log2(RNA/DNA)) beside same-run baselines.

    bioattn train activity --dataset lentimpra_wtc11 --out RUN_DIR          # 2-fold CV: fold1 → fold2, fold2 → fold1
    bioattn train activity --train my.tsv --out RUN_DIR                      # 5-fold CV, grouped by element
    bioattn train activity --train train.csv --dev dev.csv --out RUN_DIR     # holdout (--seeds 0 1 2: an ensemble)
    bioattn train activity --train a.tsv --train b.tsv --folds-from-files --out RUN_DIR   # one fold per file
    bioattn train activity --train a.tsv --train b.tsv --fit-all --out RUN_DIR   # one model on every row

Input: CSV/TSV with a 'sequence' (or 'seq') column, an optional 'id' column and numeric value columns (--target
COL, repeatable; default every numeric column), or FASTA with the value in the header ('>id value=1.3' or
'>id 1.3'). Bases A/C/G/T/N only. A prefix / suffix shared by every training sequence (an MPRA's constant
adapters, at least 6 nt) is detected and stripped before the model, or give it with --flanks 5P 3P ('-' for
none); the run remembers it, so 'bioattn predict activity' accepts sequences with or without it. --strand both
trains on random reverse complements and averages both strands in prediction (default forward: oriented assays).
A sequence and its reverse complement always fall on the same side of every split.

Before training the run prints its plan, and after the first model's first two epochs how long it expects to
take (models x seconds per model). The model's width, attention layers and batch follow the table's size unless
given (32 channels and 1 attention layer under 1,000 sequences, 64 and 2 under 5,000, else 128 and 2).

Every deep model early-stops on 10 % of the elements of its training part (never on the rows it is scored on);
the saved model then blends it (weights chosen on those 10 %; --deep-weight W fixes the deep one) with ridge
regressions fitted on its whole training part, on k-mer counts (k = 1..6) and on the scores of known motif
matrices (--motif-db, default JASPAR CORE vertebrates, shipped with pyjaspar; --blend motifs or kmers: one of
them; none: the deep model alone). Every ridge has its penalty chosen by leave-one-out CV on its training rows and
clips its features to their training range, so a sequence unlike the training rows cannot send it far. The blend
is kept only when it beats each of its parts on the same held-out rows; otherwise every model of the run is the
best part, and the summary names it. Beside them: the mean predictor, fitted on the same rows. Writes into
RUN_DIR: the model(s) (config.json + model.safetensors; fold<k>/ or seed<s>/ for several), metrics.json,
summary.md and, for cross-validation, out_of_fold.csv. On bad input: one 'error:' line, exit status 2.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bioattn.commands.common import add_data_root_argument, add_device_argument

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    data = parser.add_argument_group("data")
    source = data.add_mutually_exclusive_group(required=True)
    source.add_argument("--train", action="append", type=Path, metavar="FILE",
                        help="your own CSV/TSV/FASTA file (repeat the flag for several files)")
    source.add_argument("--dataset", choices=["lentimpra_wtc11"], help="a bundled dataset (read under --data-root)")
    add_data_root_argument(data, what="data root for --dataset")
    data.add_argument("--dev", type=Path, help="holdout file scored after training (default: cross-validation)")
    data.add_argument("--target", action="append", default=None, metavar="COL",
                      help="value column to predict (repeatable; default: every numeric column)")
    data.add_argument("--sequence-column", default=None, help="name of the sequence column (default: sequence or seq)")
    data.add_argument("--flanks", nargs=2, metavar=("5P", "3P"), default=None,
                      help="constant flanks to strip ('-' for none; default: detected)")
    data.add_argument("--strand", choices=["forward", "both"], default="forward",
                      help="forward (oriented assays) or both (RC augmentation + averaging) (default: %(default)s)")
    data.add_argument("--max-rows", type=int, default=None, help="use at most this many rows (default: all)")
    protocol = parser.add_argument_group("protocol (one of)")
    protocol.add_argument("--cv", type=int, default=None, metavar="K", help="K-fold CV grouped by element (default 5 "
                          "without --dev; --dataset lentimpra_wtc11: its two files are the folds)")
    protocol.add_argument("--folds-from-files", action="store_true", help="one fold per --train file")
    protocol.add_argument("--fit-all", action="store_true", help="one model on every row, no held-out scores")
    protocol.add_argument("--seeds", nargs="+", type=int, default=None, help="with --dev: one model per seed")
    model = parser.add_argument_group("model and training")
    by_size = "by the table's size: 32 / 64 / 128 under 1,000 / 5,000 / more sequences"
    for flag, kind, default, text in (
        ("--channels", int, None, f"conv stem width ({by_size})"), ("--kernel", int, 7, "conv kernel"),
        ("--stages", int, 3, "residual conv blocks, each pooling by 2"),
        ("--embed-dim", int, None, f"attention width ({by_size})"),
        ("--heads", int, None, "attention heads (2 under 1,000 sequences, else 4)"),
        ("--layers", int, None, "attention layers (1 under 1,000 sequences, else 2)"),
        ("--dropout", float, 0.2, "dropout"), ("--epochs", int, 40, "maximum epochs"),
        ("--batch-size", int, None, "batch size (32 under 1,000 sequences, else 64)"),
        ("--lr", float, 1e-3, "peak learning rate (AdamW, warm-up + cosine)"),
        ("--weight-decay", float, 0.01, "AdamW weight decay"), ("--patience", int, 8, "early-stopping patience (epochs)"),
        ("--shift", int, 3, "random shift augmentation (nt)"), ("--seed", int, 0, "random seed"),
        ("--kmer-branch", int, 0, "K > 0: add a linear k-mer (k=1..K) branch, fitted first by ridge regression"),
    ):
        model.add_argument(flag, type=kind, default=default,
                           help=text if default is None else f"{text} (default: %(default)s)")
    model.add_argument("--blend", choices=["auto", "motifs", "kmers", "none"], default="auto",
                       help="ridge regressions blended with the deep model: auto (k-mer and known-motif ridges), "
                            "motifs, kmers or none; the blend is kept only if it beats each part on the held-out "
                            "rows (default: %(default)s)")
    model.add_argument("--deep-weight", type=_weight, default=None, metavar="auto|W",
                       help="weight of the deep model in the blend, 0..1, the rest shared equally by the ridges "
                            "(default: auto, every weight chosen on the rows the deep model early-stopped on)")
    model.add_argument("--motif-db", default="jaspar", metavar="SPEC",
                       help="motifs of --blend motifs: jaspar, jaspar:COLLECTION:TAX_GROUP or a MEME file "
                            "(default: %(default)s)")
    model.add_argument("--motif-bins", type=int, default=2,
                       help="parts of the element whose motif scores are separate features (default: %(default)s)")
    model.add_argument("--no-baselines", action="store_true", help="skip the k-mer ridge, motif ridge and mean "
                       "baselines (slow on large files)")
    model.add_argument("--quick", action="store_true", help="smoke run: tiny model, at most 400 rows, 2 short epochs (the summary says so; not a "
                       "model to use)")
    add_device_argument(model)
    parser.add_argument("--out", type=Path, required=True, help="run directory to create")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing run directory")


def _weight(text: str) -> float | None:
    if text == "auto":
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected auto or a number in [0, 1], got {text!r}") from None


def options_from_args(args: argparse.Namespace):
    from bioattn.tasks.activity.train import ActivityOptions

    flanks = None if args.flanks is None else tuple("" if f == "-" else f.upper() for f in args.flanks)
    return ActivityOptions(
        out=args.out, data_root=args.data_root, quick=args.quick, seeds=tuple(args.seeds) if args.seeds else None,
        cv=args.cv, overwrite=args.overwrite, train=tuple(args.train or ()), dataset=args.dataset, dev=args.dev,
        targets=tuple(args.target or ()), sequence_column=args.sequence_column, flanks=flanks, strand=args.strand,
        folds_from_files=args.folds_from_files, fit_all=args.fit_all, max_rows=args.max_rows, channels=args.channels,
        kernel=args.kernel, stages=args.stages, embed_dim=args.embed_dim, heads=args.heads, layers=args.layers,
        dropout=args.dropout, epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
        weight_decay=args.weight_decay, patience=args.patience, shift=args.shift, seed=args.seed, device=args.device,
        baselines=not args.no_baselines, kmer_branch=args.kmer_branch, blend=args.blend, deep_weight=args.deep_weight,
        motif_db=args.motif_db, motif_bins=args.motif_bins)


def run(args: argparse.Namespace) -> int:
    from bioattn.tasks.activity.run import headline_line, run_activity

    metrics = run_activity(options_from_args(args))
    for warning in metrics["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    print(headline_line(metrics))
    print(f"models, metrics.json and summary.md written to {args.out}", file=sys.stderr)
    return 0
