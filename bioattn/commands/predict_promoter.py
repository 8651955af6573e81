"""Score DNA sequences (FASTA or CSV) with a trained promoter classifier.

    bioattn predict promoter --run RUN_DIR --input FILE --output OUT.csv

``FILE`` is FASTA (``.fa``/``.fasta``/``.fna``/..., parsed by Biopython) or CSV with a ``sequence`` column
(an ``id`` column names the rows, otherwise the 1-based row number does; a ``label`` column is ignored),
optionally gzip-compressed. ``OUT.csv`` gets ``id,promoter_probability,predicted_label`` in input order.
The file is streamed in batches; on any bad record the command stops with one ``error:`` line naming the
record, exit status 2, and nothing is written at ``OUT.csv``. Sequences longer than the model's
``max_len`` (its training length) are an error: cut them into windows first.
"""
from __future__ import annotations

import argparse
import csv
import itertools
import sys
from pathlib import Path

from bioattn.data.dna import read_records
from bioattn.errors import UserInputError
from bioattn.io import atomic_write
from bioattn.models.promoter import PromoterClassifier

OUTPUT_COLUMNS = ("id", "promoter_probability", "predicted_label")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", type=Path, required=True, help="run directory of recipes/promoter.py (config.json + model.safetensors)")
    parser.add_argument("--input", type=Path, required=True, help="FASTA or CSV (with a 'sequence' column), optionally .gz")
    parser.add_argument("--output", type=Path, required=True, help="CSV to write: id, promoter_probability, predicted_label")
    parser.add_argument("--batch-size", type=int, default=256, help="sequences per forward pass (default: %(default)s)")
    parser.add_argument("--threshold", type=float, default=0.5, help="probability above which label = 1 (default: %(default)s)")
    parser.add_argument("--single-strand", action="store_true",
                        help="score the given strand only (default: the model's setting, normally the mean of both strands)")


def run(args: argparse.Namespace) -> int:
    if args.batch_size < 1:
        raise UserInputError(f"--batch-size must be >= 1, got {args.batch_size}")
    if not 0.0 < args.threshold < 1.0:
        raise UserInputError(f"--threshold must be between 0 and 1, got {args.threshold}")
    if args.output.resolve() == args.input.resolve():
        raise UserInputError(f"{args.output}: --output would overwrite --input")
    model = PromoterClassifier.from_pretrained(args.run)
    rc_average = False if args.single_strand else None
    records = read_records(args.input)
    total = positives = 0
    with atomic_write(args.output, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(OUTPUT_COLUMNS)
        while chunk := list(itertools.islice(records, args.batch_size)):
            tokens = []
            for record in chunk:
                ids = record.tokens(args.input)
                if len(ids) > model.max_len:
                    raise UserInputError(
                        f"{args.input}: {record.describe()}: sequence is {len(ids)} nt long; this model accepts at most "
                        f"{model.max_len} nt (its training length); cut longer sequences into windows first"
                    )
                tokens.append(ids)
            probs = model.predict_tokens(tokens, batch_size=args.batch_size, rc_average=rc_average)
            for record, prob in zip(chunk, probs):
                label = int(prob >= args.threshold)
                writer.writerow((record.id, f"{prob:.6f}", label))
                positives += label
            total += len(chunk)
    print(f"{total} sequences scored, {positives} predicted promoters; wrote {args.output}", file=sys.stderr)
    return 0
