"""Score DNA sequences (FASTA or CSV) or scan long sequences (regions, chromosomes) with a trained promoter model.

    bioattn predict promoter --run RUN_DIR --input FILE --output OUT.csv
    bioattn predict promoter --run RUN_DIR --input genome.fa --window 70 --output scan.bedGraph
    bioattn predict promoter --model gue-prom-core-all --input FILE --output OUT.csv    (a shipped model)

Per sequence (no --window): FILE is FASTA (.fa/.fasta/.fna/..., parsed by Biopython) or CSV with a 'sequence'
column (an 'id' column names the rows, otherwise the 1-based row number does; a 'label' column is ignored),
optionally gzip-compressed. OUT.csv gets one row per sequence in input order: two-class models write
id,promoter_probability,predicted_label; multi-class models id,p_<class>...,predicted_label. The predicted
label is the class name of the training file. Sequences longer than the model's max_len are an error: scan
them with --window.

Genome scan (--window W, or --window alone for W = the model's max_len): FILE is a FASTA (plain or bgzip; indexed with pyfaidx as FILE.fai, or in a
temporary folder when FILE's folder is read-only) whose sequences are scored in windows of W nt every
--stride nt (default W/2), chromosome by chromosome, in constant memory. The output's extension picks the
format (0-based, half-open coordinates): .csv/.tsv (chrom,start,end,probability per window), .bedGraph
(rows tiling each sequence, each base scored by the window whose centre is nearest: bigWig-ready), .bw/.bigWig
(the same tiles as a bigWig track, via pyBigWig) or .bed (windows scoring >= --threshold, overlapping or touching
ones merged into one region; BED8: name = class, score = 1000 x the region's best probability, strand = the
strand scoring higher in the best window ('+' when one strand is scored, '.' on a tie), thickStart/thickEnd =
the summit, the centre base of the best window). Windows of only N are skipped. A last window is aligned to the
end of each sequence (of each --regions interval). --chrom and --regions restrict a scan; under torchrun each
process scans its share of the sequences (balanced by length) and the first writes the output, the same file
as one process writes.

The model scores as its run did (strand averaging, classes, threshold: saved in its config.json); --precision
bf16 or auto trades that exactness for speed on hardware with bf16 units. On any bad record the command stops
with one 'error:' line naming it, exit status 2, and nothing is written.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bioattn.commands.common import add_device_argument, add_model_arguments, device_from_args, model_dir
from bioattn.errors import UserInputError
from bioattn.io import STDOUT, input_file
from bioattn.models.promoter import PromoterClassifier
from bioattn.precision import (
    INFERENCE_PRECISIONS,
    inference_autocast,
    resolve_inference_precision,
    warn_if_bf16_is_emulated,
)
from bioattn.tasks.promoter_predict import predict_file
from bioattn.tasks.promoter_scan import scan_format, scan_genome
from bioattn.training.distributed import is_main_process

MODEL_WINDOW = 0  # --window without a value: the model's max_len


def _window_length(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser, trained_by="bioattn train promoter")
    add_device_argument(parser)
    parser.add_argument("--input", type=Path, required=True,
                        help="FASTA or CSV (with a 'sequence' column), optionally .gz; '-': standard input (not with --window)")
    parser.add_argument("--output", type=Path, required=True,
                        help="file to write: CSV per sequence ('-': standard output); with --window .bedGraph, .bw, .bed or .csv")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="sequences per forward pass (default: 256; a genome scan: 512 on a CPU, 4096 on a GPU)")
    parser.add_argument("--precision", choices=INFERENCE_PRECISIONS, default="fp32",
                        help="fp32: exactly the training run's evaluation; bf16: bf16 autocast (about 1.6x the "
                             "throughput on a CPU with bf16 units; GUE prom_core_all dev: probabilities within 0.01, "
                             "1-2 of 5,920 labels changed); auto: bf16 where the CPU or GPU has bf16 units, else fp32 "
                             "(default: %(default)s)")
    parser.add_argument("--threshold", type=float, default=None,
                        help="probability from which a two-class model predicts its positive class, and the BED cut-off "
                             "of a scan (default: the model's, normally 0.5)")
    parser.add_argument("--single-strand", action="store_true",
                        help="score the given strand only (default: the model's setting, normally the mean of both strands)")
    scan = parser.add_argument_group("genome scan")
    scan.add_argument("--window", type=_window_length, nargs="?", const=MODEL_WINDOW, default=None, metavar="NT",
                      help="scan long sequences in windows of NT nt, at most the model's max_len; '--window' alone: "
                           "the model's max_len (default: no scan, one row per sequence)")
    scan.add_argument("--stride", type=int, default=None, metavar="NT", help="distance between window starts (default: window / 2)")
    scan.add_argument("--class", dest="scan_class", default=None, metavar="NAME",
                      help="class whose probability a scan reports (default: the positive class of a two-class model; "
                           "required for multi-class models)")
    scan.add_argument("--chrom", nargs="+", default=None, metavar="NAME",
                      help="scan only these sequences of the FASTA (default: all)")
    scan.add_argument("--regions", type=Path, default=None, metavar="BED",
                      help="scan only these intervals (BED: chrom, start, end; overlapping ones merged; with --chrom: "
                           "those on the --chrom sequences) (default: whole sequences)")
    scan.add_argument("--compile", action="store_true",
                      help="run the scan's model through torch.compile (CUDA graphs on a GPU): pays on long GPU scans, "
                           "costs a minute of compiling (default: off)")


def _scan_class_index(model: PromoterClassifier, name: str | None) -> int:
    if name is None:
        if not model.binary:
            raise UserInputError(f"this model has {model.num_classes} classes ({', '.join(model.class_names)}); "
                                 f"choose the one to scan for with --class")
        return 1
    if name not in model.class_names:
        raise UserInputError(f"--class {name!r} is not a class of this model ({', '.join(model.class_names)})")
    return model.class_names.index(name)


def run(args: argparse.Namespace) -> int:
    if args.batch_size is not None and args.batch_size < 1:
        raise UserInputError(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.threshold is not None and not 0.0 < args.threshold < 1.0:
        raise UserInputError(f"--threshold must be between 0 and 1, got {args.threshold}")
    if args.window is None and (args.stride is not None or args.scan_class is not None or args.chrom is not None
                                or args.regions is not None or args.compile):
        raise UserInputError("--stride, --class, --chrom, --regions and --compile only apply to a genome scan: add --window")
    from_stdin = str(args.input) == STDOUT
    if from_stdin and args.window is not None:
        raise UserInputError("--input -: a genome scan needs a FASTA file (it is indexed), not standard input")
    if not from_stdin and args.output.resolve() == args.input.resolve():
        raise UserInputError(f"{args.output}: --output would overwrite --input")
    device = device_from_args(args)
    model = PromoterClassifier.from_pretrained(model_dir(args), map_location=device)
    precision = resolve_inference_precision(args.precision, device)
    warn_if_bf16_is_emulated(precision, device)
    if args.threshold is not None:
        if not model.binary and args.window is None:
            raise UserInputError(f"--threshold applies to two-class models and to genome scans; this model has "
                                 f"{model.num_classes} classes and predicts the most probable one")
        model.threshold = args.threshold
    rc_average = False if args.single_strand else None
    if args.window is None:
        if args.output.suffix.lower() in (".bed", ".bedgraph", ".bw", ".bigwig"):
            raise UserInputError(f"{args.output}: a {args.output.suffix} output is written by a genome scan: add --window")
        with input_file(args.input) as source, inference_autocast(precision, device):
            counts = predict_file(model, source, args.output, batch_size=args.batch_size or 256,
                                  rc_average=rc_average)
        shown = ", ".join(f"{name}: {counts[name]}" for name in model.class_names)
        written = "standard output" if str(args.output) == STDOUT else args.output
        print(f"{sum(counts.values())} sequences scored in {precision} (predicted {shown}); wrote {written}", file=sys.stderr)
        return 0
    scan_format(args.output)
    class_index = _scan_class_index(model, args.scan_class)
    window = model.max_len if args.window == MODEL_WINDOW else args.window
    stride = args.stride if args.stride is not None else max(1, window // 2)
    with inference_autocast(precision, device):
        summary = scan_genome(model, args.input, args.output, window=window, stride=stride, class_index=class_index,
                              batch_size=args.batch_size, rc_average=rc_average, chroms=args.chrom,
                              regions=args.regions, compile_model=args.compile)
    if not is_main_process():
        return 0
    print(f"{summary.sequences} sequences, {summary.windows} windows of {window} nt every {stride} nt scored in {precision} "
          f"({summary.skipped_n_only} only-N windows skipped), {summary.above_threshold} with p({model.class_names[class_index]}) "
          f">= {model.threshold}" + (f", merged into {summary.regions} regions" if summary.regions else "")
          + f"; wrote {args.output}", file=sys.stderr)
    return 0
