"""Score DNA sequences (FASTA or CSV) or scan long sequences (regions, chromosomes) with a trained promoter model.

    bioattn predict promoter --model NAME_OR_DIR --input FILE --output OUT.csv
    bioattn predict promoter --model NAME_OR_DIR --input genome.fa --window 70 --output scan.bedGraph
    bioattn predict promoter --model gue-prom-core-all --input FILE --output OUT.csv    (a shipped model)

Per sequence (no --window): FILE is FASTA (.fa/.fasta/.fna/..., parsed by Biopython) or CSV with a 'sequence'
column (an 'id' column names the rows, otherwise the 1-based row number does; a 'label' column is ignored),
optionally gzip-compressed. OUT.csv gets one row per sequence in input order: two-class models write
id,promoter_probability,predicted_label; multi-class models id,p_<class>...,predicted_label. The predicted
label is the class name of the training file. Sequences longer than the model's max_len are an error: scan
them with --window. When the run saved its training composition (composition.json: GC content, N fraction,
dinucleotide frequencies), a last column 'warning' says how a sequence differs from the training sequences, and
a 'warning:' line on stderr names it.

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

from bioattn.commands.common import add_device_argument, add_model_arguments, model_source
from bioattn.commands.vocabulary import add_alias
from bioattn.io import STDOUT
from bioattn.precision import INFERENCE_PRECISIONS
from bioattn.tasks.promoter.predict_run import MODEL_WINDOW


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
                        help="fp32: exactly the training run's evaluation; bf16: bf16 autocast (faster where the CPU or GPU "
                             "has bf16 units; probabilities differ from fp32 by rounding, so a label near the "
                             "threshold may change); auto: bf16 where the CPU or GPU has bf16 units, else fp32 "
                             "(default: %(default)s)")
    parser.add_argument("--threshold", type=float, default=None,
                        help="probability from which a two-class model predicts its positive class, and the BED cut-off "
                             "of a scan (default: the model's, normally 0.5)")
    strand = parser.add_argument("--strand", choices=("model", "both", "forward"), default="model",
                                 help="score as the model was trained (normally the mean of both strands), the mean of "
                                      "both strands, or the given strand only (default: %(default)s)")
    add_alias(parser, strand, "--single-strand", value="forward")
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


def run(args: argparse.Namespace) -> int:
    from bioattn.tasks.promoter.predict_run import predict_promoter

    result = predict_promoter(model_source(args), args.input, args.output, batch_size=args.batch_size,
                              precision=args.precision, threshold=args.threshold, strand=args.strand,
                              window=args.window, stride=args.stride, scan_class=args.scan_class, chroms=args.chrom,
                              regions=args.regions, compile_model=args.compile, device=args.device)
    if not result.written:  # another process of a torchrun scan writes the merged output
        return 0
    if result.counts is not None:
        shown = ", ".join(f"{name}: {result.counts[name]}" for name in result.class_names)
        written = "standard output" if str(args.output) == STDOUT else args.output
        print(f"{sum(result.counts.values())} sequences scored in {result.precision} (predicted {shown}); wrote {written}",
              file=sys.stderr)
        return 0
    scan = result.scan
    print(f"{scan.sequences} sequences, {scan.windows} windows of {result.window} nt every {result.stride} nt scored in "
          f"{result.precision} ({scan.skipped_n_only} only-N windows skipped), {scan.above_threshold} with "
          f"p({result.class_name}) >= {result.threshold}" + (f", merged into {scan.regions} regions" if scan.regions else "")
          + f"; wrote {args.output}", file=sys.stderr)
    return 0
