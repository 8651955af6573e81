"""The ``bioattn train|predict|explain activity`` commands: their options, each field one flag
(:func:`bioattn.options.flag`), and what each runs."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from bioattn.data.motif_db import DEFAULT_DB, DEFAULT_Q
from bioattn.options import flag, values
from bioattn.tasks.activity.methods import ACTIVITY_METHODS, KNOWN_MOTIF_WEIGHTS
from bioattn.tasks.flags import (
    data_root_flag, device_flag, explain_input_flag, explain_out_flag, explain_overwrite_flag,
    faithfulness_steps_flag, method_flag, method_options, model_flag, skip_faithfulness_flag,
)

STRANDS = ("forward", "both")
_BY_SIZE = "by the table's size: 32 / 64 / 128 under 1,000 / 5,000 / more sequences"
_DATA, _PROTOCOL, _MODEL = "data", "protocol (one of)", "model and training"
_TRAINED_BY = "bioattn train activity"


def _weight(text: str) -> float | None:
    """``--deep-weight``: ``auto`` (``None``) or a number."""
    if text == "auto":
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"expected auto or a number in [0, 1], got {text!r}") from None


def _flank(text: str) -> str:
    """One ``--flanks`` value: ``-`` for none, bases in upper case."""
    return "" if text == "-" else text.upper()


@dataclass(frozen=True, kw_only=True)
class TrainActivity:
    """Train the activity regressor (sequence → measured activity, e.g. MPRA log2(RNA/DNA)) beside same-run baselines.

        bioattn train activity --dataset lentimpra_wtc11 --out RUN_DIR          # 2-fold CV: fold1 → fold2, fold2 → fold1
        bioattn train activity --train my.tsv --out RUN_DIR                      # 5-fold CV, grouped by element
        bioattn train activity --train train.csv --dev dev.csv --out RUN_DIR     # holdout (--seeds 0 1 2: an ensemble)
        bioattn train activity --train a.tsv --train b.tsv --folds-from-files --out RUN_DIR   # one fold per file
        bioattn train activity --train a.tsv --train b.tsv --fit-all --out RUN_DIR   # one model on every row
        bioattn train activity --train hepg2=h.tsv --train wtc11=w.tsv --out RUN_DIR   # one output per cell type

    Input: CSV/TSV with a 'sequence' (or 'seq') column, an optional 'id' column and numeric value columns (--target
    COL, repeatable; default every numeric column), or FASTA with the value in the header ('>id value=1.3' or
    '>id 1.3'). Bases A/C/G/T/N only. A prefix / suffix shared by every training sequence (an MPRA's constant
    adapters, at least 6 nt) is detected and stripped before the model, or give it with --flanks 5P 3P ('-' for
    none); the run remembers it, so 'bioattn predict activity' accepts sequences with or without it. --strand both
    trains on random reverse complements and averages both strands in prediction (default forward: oriented assays).
    A sequence and its reverse complement always fall on the same side of every split.

    Several cell types or assays, one model: --train NAME=FILE per set (one value column each, or the one --target
    names); the model gets one output per NAME on a shared encoder, a row's missing outputs (the other sets') are
    masked out of the loss and of every score, each output gets its own baselines and scores, and the folds are
    grouped by element across all sets. With --folds-from-files the first file of each set is fold 1, the second
    fold 2, and so on. A wide table with one value column per cell type works too (an empty cell or NA: not
    measured). Elements measured in both orientations train on both, as separate rows (an oriented assay: --strand
    forward, the default); both orientations of an element always share a fold.

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

    train: tuple[Path, ...] = flag("--train", default=(), action="append", metavar="FILE", group=_DATA,
                                   exclusive="source", required=True,
                                   help="your own CSV/TSV/FASTA file, or NAME=FILE for a named set (one model output "
                                        "per NAME); repeat the flag for several files")
    dataset: str | None = flag("--dataset", default=None,
                               choices=["lentimpra_wtc11", "lentimpra_hepg2", "lentimpra_hepg2_wtc11"], group=_DATA,
                               exclusive="source", help="a bundled dataset (read under --data-root); "
                                                        "lentimpra_hepg2_wtc11: two outputs, hepg2 and wtc11")
    data_root: str | None = data_root_flag(what="data root for --dataset", group=_DATA)
    dev: Path | None = flag("--dev", default=None, group=_DATA,
                            help="holdout file scored after training (default: cross-validation)")
    targets: tuple[str, ...] = flag("--target", default=(), action="append", metavar="COL", group=_DATA,
                                    help="value column to predict (repeatable; default: every numeric column)")
    sequence_column: str | None = flag("--sequence-column", default=None, group=_DATA,
                                       help="name of the sequence column (default: sequence or seq)")
    flanks: tuple[str, str] | None = flag("--flanks", default=None, nargs=2, metavar=("5P", "3P"), type=_flank,
                                          group=_DATA, help="constant flanks to strip ('-' for none; default: detected)")
    strand: str = flag("--strand", default="forward", choices=STRANDS, group=_DATA,
                       help="forward (oriented assays) or both (RC augmentation + averaging) (default: %(default)s)")
    max_rows: int | None = flag("--max-rows", default=None, group=_DATA,
                                help="use at most this many rows (default: all)")
    cv: int | None = flag("--cv", default=None, metavar="K", group=_PROTOCOL,
                          help="K-fold CV grouped by element (default 5 without --dev; a bundled --dataset: its "
                               "two files (per set) are the folds)")
    folds_from_files: bool = flag("--folds-from-files", default=False, group=_PROTOCOL,
                                  help="one fold per --train file")
    fit_all: bool = flag("--fit-all", default=False, group=_PROTOCOL, help="one model on every row, no held-out scores")
    seeds: tuple[int, ...] | None = flag("--seeds", default=None, nargs="+", group=_PROTOCOL,
                                         help="with --dev: one model per seed")
    channels: int | None = flag("--channels", default=None, group=_MODEL, help=f"conv stem width ({_BY_SIZE})")
    kernel: int = flag("--kernel", default=7, group=_MODEL, help="conv kernel (default: %(default)s)")
    stages: int = flag("--stages", default=3, group=_MODEL,
                       help="residual conv blocks, each pooling by 2 (default: %(default)s)")
    embed_dim: int | None = flag("--embed-dim", default=None, group=_MODEL, help=f"attention width ({_BY_SIZE})")
    heads: int | None = flag("--heads", default=None, group=_MODEL,
                             help="attention heads (2 under 1,000 sequences, else 4)")
    layers: int | None = flag("--layers", default=None, group=_MODEL,
                              help="attention layers (1 under 1,000 sequences, else 2)")
    dropout: float = flag("--dropout", default=0.2, group=_MODEL, help="dropout (default: %(default)s)")
    epochs: int = flag("--epochs", default=40, group=_MODEL, help="maximum epochs (default: %(default)s)")
    batch_size: int | None = flag("--batch-size", default=None, group=_MODEL,
                                  help="batch size (32 under 1,000 sequences, else 64)")
    lr: float = flag("--lr", default=1e-3, group=_MODEL,
                     help="peak learning rate (AdamW, warm-up + cosine) (default: %(default)s)")
    weight_decay: float = flag("--weight-decay", default=0.01, group=_MODEL,
                               help="AdamW weight decay (default: %(default)s)")
    patience: int = flag("--patience", default=8, group=_MODEL,
                         help="early-stopping patience (epochs) (default: %(default)s)")
    shift: int = flag("--shift", default=3, group=_MODEL, help="random shift augmentation (nt) (default: %(default)s)")
    seed: int = flag("--seed", default=0, group=_MODEL, help="random seed (default: %(default)s)")
    kmer_branch: int = flag("--kmer-branch", default=0, group=_MODEL,
                            help="K > 0: add a linear k-mer (k=1..K) branch, fitted first by ridge regression "
                                 "(default: %(default)s)")
    blend: str = flag("--blend", default="auto", choices=["auto", "motifs", "kmers", "none"], group=_MODEL,
                      help="ridge regressions blended with the deep model: auto (k-mer and known-motif ridges), "
                           "motifs, kmers or none; the blend is kept only if it beats each part on the held-out "
                           "rows (default: %(default)s)")
    deep_weight: float | None = flag("--deep-weight", default=None, type=_weight, metavar="auto|W", group=_MODEL,
                                     help="weight of the deep model in the blend, 0..1, the rest shared equally by "
                                          "the ridges (default: auto, every weight chosen on the rows the deep model "
                                          "early-stopped on)")
    motif_db: str = flag("--motif-db", default="jaspar", metavar="SPEC", group=_MODEL,
                         help="motifs of --blend motifs: jaspar, jaspar:COLLECTION:TAX_GROUP or a MEME file "
                              "(default: %(default)s)")
    motif_bins: int = flag("--motif-bins", default=2, group=_MODEL,
                           help="parts of the element whose motif scores are separate features (default: %(default)s)")
    no_baselines: bool = flag("--no-baselines", default=False, group=_MODEL,
                              help="skip the k-mer ridge, motif ridge and mean baselines (slow on large files)")
    quick: bool = flag("--quick", default=False, group=_MODEL, help="smoke run: tiny model, at most 400 rows, 2 short "
                                                                    "epochs (the summary says so; not a model to use)")
    device: str = device_flag(group=_MODEL)
    out: Path = flag("--out", required=True, help="run directory to create")
    overwrite: bool = flag("--overwrite", default=False, help="replace an existing run directory")

    def run(self) -> int:
        from bioattn.tasks.activity.run import headline_line
        from bioattn.tasks.activity.task import TASK
        from bioattn.tasks.activity.train import ActivityOptions
        options = {**values(self), "baselines": not self.no_baselines}
        del options["no_baselines"]
        metrics = TASK.run(ActivityOptions(**options))
        for warning in metrics["warnings"]:
            print(f"warning: {warning}", file=sys.stderr)
        print(headline_line(metrics))
        print(f"models, metrics.json and summary.md written to {self.out}", file=sys.stderr)
        return 0


@dataclass(frozen=True, kw_only=True)
class PredictActivity:
    """Predict activities of DNA sequences with a trained activity model (a run directory or a shipped model).

        bioattn predict activity --model RUN_DIR_OR_NAME --input FILE --output values.csv|.tsv|-

    FILE: FASTA or CSV/TSV with a 'sequence' (or 'seq') column (an 'id' column names the rows; value columns are
    ignored). Sequences may carry the run's constant flanks or not (the run remembers them); an element longer than
    the model's input length, or a base other than A/C/G/T/N (IUPAC ambiguity codes included), is one 'error:' line
    naming the record (exit status 2, nothing written). The output has one row per sequence, in input order: id, then
    one column per target (--output-name NAME: target NAME's alone; CSV or TSV by the file name; '-': TSV on
    standard output). A cross-validation or seed run directory predicts the mean of its models. A prediction more
    than 5 standard deviations from the mean of the training values is named in a 'warning:' line: the model
    extrapolates there.
    """

    model: str | None = model_flag(trained_by=_TRAINED_BY)
    device: str = device_flag()
    input: Path = flag("--input", required=True, help="FASTA or CSV/TSV of sequences")
    output: Path = flag("--output", required=True, help="values.csv or .tsv to write (-: TSV on standard output)")
    strand: str | None = flag("--strand", default=None, choices=STRANDS,
                              help="override the run's strand setting (default: the run's)")
    batch_size: int = flag("--batch-size", default=256, help="sequences per batch (default: %(default)s)")
    output_name: str | None = flag("--output-name", default=None, metavar="NAME",
                                   help="of a model of several targets (e.g. one per cell type), write only the "
                                        "column of target NAME (matched ignoring case and characters other than "
                                        "letters and digits); an unknown NAME is an error listing the model's "
                                        "targets (default: every target)")

    def run(self) -> int:
        from bioattn.tasks.activity.predict import predict_activity
        rows = predict_activity(self.model, self.input, self.output, strand=self.strand, batch_size=self.batch_size,
                                device=self.device, output_name=self.output_name)
        print(f"{rows} sequences scored → {self.output}", file=sys.stderr)
        return 0


@dataclass(frozen=True, kw_only=True)
class ExplainActivity:
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

    model: str | None = model_flag(trained_by=_TRAINED_BY)
    device: str = device_flag()
    input: str = explain_input_flag(help="FASTA or CSV/TSV with a 'sequence' (or 'seq') column and optional 'id', "
                                         "with or without the run's flanks")
    out: str = explain_out_flag()
    overwrite: bool = explain_overwrite_flag()
    target: str | None = flag("--target", default=None, metavar="NAME",
                              help="the output explained, for a model of several targets (default: the first)")
    strand: str | None = flag("--strand", default=None, choices=STRANDS,
                              help="override the run's strand setting (default: the run's)")
    max_rows: int = flag("--max-rows", default=1000, help="explain at most this many records (default: %(default)s)")
    plot_sequences: int = flag("--plot-sequences", default=6,
                               help="write a track PNG for the first N records (default: %(default)s)")
    batch_size: int = flag("--batch-size", default=64, help="sequences per pass (default: %(default)s)")
    method: str = method_flag(methods=ACTIVITY_METHODS)
    skip_faithfulness: bool = skip_faithfulness_flag(unit="nucleotides")
    faithfulness_steps: int = faithfulness_steps_flag()
    faithfulness_sequences: int = flag("--faithfulness-sequences", default=32,
                                       help="measure faithfulness on the first N records (default: %(default)s; every "
                                            "method runs on them, ism included, which scores 3 edits per nucleotide: "
                                            "seconds per 200-nt record on a CPU)")
    known_motif_weights: int = flag("--known-motif-weights", default=KNOWN_MOTIF_WEIGHTS, metavar="N",
                                    help="list the N known-motif features the model weighs most (default: "
                                         "%(default)s; 0: none)")
    motifs: bool = flag("--motifs", default=False, group="motifs",
                        help="also discover the motifs the model uses: in-silico mutagenesis hypothetical "
                             "contributions of every record (elements of one length) clustered by TF-MoDISco and "
                             "matched against --motif-db with TOMTOM; writes motifs.html, motifs.tsv, logos/ and "
                             "positions/ (default: off)")
    motif_db: str = flag("--motif-db", default=DEFAULT_DB, metavar="DB", group="motifs",
                         help="known motifs for --motifs: jaspar (JASPAR2026 CORE vertebrates, shipped with pyjaspar), "
                              "jaspar:COLLECTION:TAX_GROUP, a MEME-format file, or none (default: %(default)s)")
    motif_q: float = flag("--motif-q", default=DEFAULT_Q, group="motifs",
                          help="TOMTOM q-value below which a pattern matches a known motif (default: %(default)s)")
    motif_background: bool = flag("--no-motif-background", default=True, action="store_false", group="motifs",
                                  help="skip the composition control of --motifs (the same pipeline on a dinucleotide "
                                       "shuffle of every record; its patterns are flagged as composition) (default: "
                                       "motif_background=%(default)s)")

    def run(self) -> int:
        from bioattn.tasks.activity.explain import describe, explain_activity
        keywords = values(self, "target", "strand", "max_rows", "batch_size", "plot_sequences",
                          "faithfulness_sequences", "known_motif_weights", "motifs", "motif_db", "motif_q",
                          "motif_background", "device", "out", "overwrite")
        print(describe(explain_activity(self.model, self.input, **keywords, **method_options(self))))
        return 0
