"""Predict activities of DNA sequences with a trained activity model (a run directory or a shipped model).

    bioattn predict activity --model RUN_DIR_OR_NAME --input FILE --output values.csv|.tsv|-

FILE: FASTA or CSV/TSV with a 'sequence' (or 'seq') column (an 'id' column names the rows; value columns are
ignored). Sequences may carry the run's constant flanks or not (the run remembers them); an element longer than
the model's input length, or a base other than A/C/G/T/N (IUPAC ambiguity codes included), is one 'error:' line
naming the record (exit status 2, nothing written). The output has one row per sequence, in input order: id, then
one column per target (CSV or TSV by the file name; '-': TSV on standard output). A cross-validation or seed run
directory predicts the mean of its models. A prediction more than 5 standard deviations from the mean of the
training values is named in a 'warning:' line: the model extrapolates there.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bioattn.commands.common import add_model_and_device_arguments, model_source

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_and_device_arguments(parser, trained_by="bioattn train activity")
    parser.add_argument("--input", type=Path, required=True, help="FASTA or CSV/TSV of sequences")
    parser.add_argument("--output", type=Path, required=True, help="values.csv or .tsv to write (-: TSV on standard output)")
    parser.add_argument("--strand", choices=["forward", "both"], default=None,
                        help="override the run's strand setting (default: the run's)")
    parser.add_argument("--batch-size", type=int, default=256, help="sequences per batch (default: %(default)s)")


def run(args: argparse.Namespace) -> int:
    from bioattn.tasks.activity.predict import predict_activity

    rows = predict_activity(model_source(args), args.input, args.output, strand=args.strand,
                            batch_size=args.batch_size, device=args.device)
    print(f"{rows} sequences scored → {args.output}", file=sys.stderr)
    return 0
