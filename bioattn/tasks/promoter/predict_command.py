"""The ``bioattn predict promoter`` command: its options and its run (no training code imported)."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from bioattn.options import flag, values
from bioattn.precision import INFERENCE_PRECISIONS
from bioattn.tasks.flags import device_flag, model_flag
from bioattn.tasks.promoter.predict_run import MODEL_WINDOW

_SCAN = "genome scan"


def _window_length(text: str) -> int:
    """``--window NT``: a whole number of nucleotides, at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"expected a whole number of nucleotides, got {text!r}") from None
    if value < 1:
        raise ValueError(f"must be >= 1, got {value}")
    return value


@dataclass(frozen=True, kw_only=True)
class PredictPromoter:
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

    model: str | None = model_flag(trained_by="bioattn train promoter")
    device: str = device_flag()
    input: Path = flag("--input", required=True, help="FASTA or CSV (with a 'sequence' column), optionally .gz; '-': "
                       "standard input (not with --window)")
    output: Path = flag("--output", required=True, help="file to write: CSV per sequence ('-': standard output); with "
                        "--window .bedGraph, .bw, .bed or .csv")
    batch_size: int | None = flag("--batch-size", default=None, help="sequences per forward pass (default: 256; a "
                                  "genome scan: 512 on a CPU, 4096 on a GPU)")
    precision: str | None = flag("--precision", default=None, choices=INFERENCE_PRECISIONS,
                                 help="fp32: exactly the training run's evaluation; bf16: bf16 autocast (faster where "
                                      "the CPU or GPU has bf16 units; probabilities differ from fp32 by rounding, so a "
                                      "label near the threshold may change); auto: bf16 where the CPU or GPU has bf16 "
                                      "units, else fp32 (default: fp32 for sequences, auto for a genome scan)")
    threshold: float | None = flag("--threshold", default=None,
                                   help="probability from which a two-class model predicts its positive class, and "
                                        "the BED cut-off of a scan (default: the model's, normally 0.5)")
    strand: str = flag("--strand", default="model", choices=("model", "both", "forward"),
                       help="score as the model was trained (normally the mean of both strands), the mean of both "
                            "strands, or the given strand only (default: %(default)s)")
    window: int | None = flag("--window", default=None, type=_window_length, nargs="?", const=MODEL_WINDOW,
                              metavar="NT", group=_SCAN, help="scan long sequences in windows of NT nt, at most the "
                              "model's max_len; '--window' alone: the model's max_len (default: no scan, one row per "
                              "sequence)")
    stride: int | None = flag("--stride", default=None, metavar="NT", group=_SCAN,
                              help="distance between window starts (default: window / 2)")
    scan_class: str | None = flag("--class", default=None, metavar="NAME", group=_SCAN,
                                  help="class whose probability a scan reports (default: the positive class of a "
                                       "two-class model; required for multi-class models)")
    chrom: tuple[str, ...] | None = flag("--chrom", default=None, nargs="+", metavar="NAME", group=_SCAN,
                                         help="scan only these sequences of the FASTA (default: all)")
    regions: Path | None = flag("--regions", default=None, metavar="BED", group=_SCAN,
                                help="scan only these intervals (BED: chrom, start, end; overlapping ones merged; with "
                                     "--chrom: those on the --chrom sequences) (default: whole sequences)")
    compile: bool = flag("--compile", default=False, group=_SCAN, help="run the scan's model through torch.compile "
                         "(CUDA graphs on a GPU): pays on long GPU scans, costs a minute of compiling (default: off)")

    def run(self) -> int:
        from bioattn.tasks.promoter.predict_run import predict_promoter
        result = predict_promoter(self.model, self.input, self.output, chroms=self.chrom, compile_model=self.compile,
                                  **values(self, "batch_size", "precision", "threshold", "strand", "window", "stride",
                                           "scan_class", "regions", "device"))
        if result.written:  # else another process of a torchrun scan writes the merged output
            print(result.describe(self.output), file=sys.stderr)
        return 0
