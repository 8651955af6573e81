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

The model scores as its run did (strand averaging, classes, threshold: saved in its config.json). Sequences are
scored in fp32, exactly as the run evaluated them; a genome scan runs in bf16 where the CPU or GPU has bf16 units
(probabilities within about 0.01 of fp32, so the bytes differ between machines with and without them): add
--precision fp32 for the exact, machine-independent scores. On any bad record the command stops with one 'error:'
line naming it, exit status 2, and nothing is written.
"""
from __future__ import annotations

import argparse
import sys

from bioattn.commands.common import model_source
from bioattn.commands.promoter_args import add_predict_arguments as add_arguments

__all__ = ["add_arguments", "run"]


def run(args: argparse.Namespace) -> int:
    from bioattn.tasks.promoter.predict_run import predict_promoter

    result = predict_promoter(model_source(args), args.input, args.output, batch_size=args.batch_size,
                              precision=args.precision, threshold=args.threshold, strand=args.strand,
                              window=args.window, stride=args.stride, scan_class=args.scan_class, chroms=args.chrom,
                              regions=args.regions, compile_model=args.compile, device=args.device)
    if not result.written:  # another process of a torchrun scan writes the merged output
        return 0
    print(result.describe(args.output), file=sys.stderr)
    return 0
