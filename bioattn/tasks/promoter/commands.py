"""The ``bioattn train|predict promoter`` commands: their options, each field one flag (:func:`bioattn.options.flag`),
and what each runs (``explain promoter``: :mod:`bioattn.tasks.promoter.explain_command`)."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from bioattn.options import flag, training_flags, values
from bioattn.precision import INFERENCE_PRECISIONS
from bioattn.tasks.flags import cv_flag, cv_repeats_flag, device_flag, model_flag, seeds_flag
from bioattn.tasks.promoter.predict_run import MODEL_WINDOW
from bioattn.tasks.promoter.pretrain import MASK_PROBABILITY, PRETRAIN_LR
from bioattn.tasks.promoter.train import DEFAULT_TASK, DEFAULTS, FINETUNE_MASK, SMALL_DATA_EPOCHS, TASK_RECIPES, TASKS

if TYPE_CHECKING:
    from bioattn.tasks.promoter.train import PromoterOptions
    from bioattn.training import TrainConfig

_DATA, _MODEL, _ENSEMBLES, _SCAN = "data", "model", "ensembles (one of)", "genome scan"
_TRAINED_BY = "bioattn train promoter"
#: ``--strand`` of ``train promoter`` -> :attr:`PromoterOptions.rc_average`.
_RC_AVERAGE = {None: None, "both": True, "forward": False}


def _per_task(field: str) -> str:
    """``"12 for prom_core_all, 4 for prom_core_notata, ..."``: the tasks' recipe values of ``field``."""
    own = getattr(TASK_RECIPES[None], field)
    return ", ".join(f"{getattr(recipe, field):g} for {task}" for task, recipe in TASK_RECIPES.items()
                     if task is not None and getattr(recipe, field) != own)


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
class TrainPromoter:
    """Train the DNA promoter classifier (GUE, E. coli or your own labelled sequences) beside trivial baselines.

        bioattn train promoter --task prom_core_all --out RUN_DIR [--max-minutes M] [--quick]
        bioattn train promoter --train my.csv [--dev dev.csv] [--test test.fa] --out RUN_DIR
        bioattn train promoter --task prom_core_all --seeds 0 1 2 --out RUN_DIR     # an ensemble of 3 seeds
        bioattn train promoter --train my.csv --cv 5 --out RUN_DIR                 # 5-fold CV, fold models = ensemble

    Bundled tasks (read under --data-root): prom_core_all (default), prom_core_notata, prom_core_tata,
    prom_300_tata (GUE; train.csv, early stopping on dev.csv MCC, also scored on test.csv when present) and
    ecoli_sigma70 (5-fold CV with the case and header label leaks removed). Download them with
    'bioattn data fetch gue' / 'bioattn data fetch ecoli_sigma70'. Without a data root (or one lacking the task),
    --quick on prom_core_all uses a sample shipped with bioattn (2,000 train + 500 dev GUE sequences) and says so;
    other runs stop with an error.

    Your own data (--train, instead of --task): CSV/TSV with columns sequence,label (optional id) or FASTA with
    the label in the description ('>seq7 label=1'; only the 'label=' field of a header is read), plain or .gz.
    Labels may be any text or integers; two classes give a sigmoid model (the second label in sorted order is
    the positive class, e.g. 1 of 0/1), more give a softmax model. Sequences are upper-cased before tokenising
    and may differ in length up to --max-length (default: the longest training sequence); training batches
    group sequences of similar length. Without --dev, a seeded stratified 10% of the training file is the dev
    set, with identical sequences kept on one side. Strands: your own data and E. coli default to random reverse
    complements in training and both strands averaged in prediction (sequences of unknown orientation); the GUE
    tasks, oriented on the transcription start, default to neither. --rc-augment / --no-rc-augment overrides.
    --pretrain-epochs N first trains the encoder to predict masked nucleotides of the training sequences (no labels,
    dev and test unused; into <member>/pretrain/), masking a --pretrain-mask fraction of them, then fine-tunes at a
    lower --lr; the three 70-nt GUE tasks pretrain by default (each flag's help lists the per-task defaults).

    Writes into RUN_DIR: config.json + model.safetensors (for 'bioattn predict promoter', which reproduces this
    run's numbers without extra flags), metrics.json, summary.md, training_curve.png, train_log.csv, checkpoint/
    (--resume continues an interrupted run). With --seeds or --cv, one complete run directory per member
    (seed<S>/ or fold<k>/) and a config.json that makes RUN_DIR load as their ensemble (mean probability) in
    predict, explain and from_pretrained. Runs under torchrun unchanged (members train one after another).
    """

    task: str | None = flag("--task", default=None, choices=TASKS, group=_DATA, exclusive="source",
                            help=f"bundled benchmark (default: {DEFAULT_TASK} when no --train is given)")
    train: Path | None = flag("--train", default=None, metavar="FILE", group=_DATA, exclusive="source",
                              help="your own labelled FASTA ('>id label=X') or CSV/TSV (sequence,label[,id]), .gz ok "
                                   "(default: none)")
    dev: Path | None = flag("--dev", default=None, metavar="FILE", group=_DATA,
                            help="dev file for early stopping (default: a stratified 10%% of --train)")
    test: Path | None = flag("--test", default=None, metavar="FILE", group=_DATA,
                             help="also score this file (default: none)")
    positive_class: str | None = flag(
        "--positive-class", default=None, metavar="NAME", group=_DATA,
        help="--train with two labels: the positive class, the one AUROC, MCC and p_<class> are about (default: the "
             "label that is not normal/negative/control/healthy/benign/background/absent/no/false/0, else the second "
             "in sorted order; named on stderr and saved with the model)")
    max_length: int | None = flag("--max-length", default=None, metavar="NT", group=_DATA,
                                  help="longest sequence the model accepts (default: the longest training sequence)")
    data_root: str | None = flag("--data-root", default=None, group=_DATA,
                                 help="data folder of the bundled tasks (default: $BIOATTN_DATA_ROOT, else "
                                      "../shared/data)")
    max_rows: int | None = flag("--max-rows", default=None, group=_DATA, hidden=True, help="cap per split (tests)")
    out: Path = flag("--out", required=True, help="run directory to create")
    quick: bool = flag("--quick", default=False,
                       help="smoke test: tiny model, at most 1500 rows per split, 2 short epochs (about a minute on 2 "
                            "cores); without a data root, prom_core_all comes from the embedded sample (default: off)")
    embed_dim: int = flag("--embed-dim", default=64, group=_MODEL, help="model width (token size) (default: %(default)s)")
    heads: int = flag("--heads", default=4, group=_MODEL, help="attention heads (default: %(default)s)")
    layers: int = flag("--layers", default=2, group=_MODEL, help="transformer layers (default: %(default)s)")
    conv_kernel: int = flag("--conv-kernel", default=15, group=_MODEL,
                            help="odd kernel of the conv embedding, 0 = off (default: %(default)s)")
    conv_layers: int = flag("--conv-layers", default=1, group=_MODEL,
                            help="residual conv embedding blocks (default: %(default)s)")
    dropout: float | None = flag("--dropout", default=None, group=_MODEL,
                                 help="dropout of the residual branches and the head (default: 0 for the GUE tasks; "
                                      "0.1 for ecoli_sigma70 and your own files)")
    head_temperature: bool = flag("--head-temperature", default=False, group=_MODEL,
                                  help="learn one softmax temperature per attention head (num_heads parameters per "
                                       "layer; identity at initialisation) (default: off)")
    pretrain_epochs: int | None = flag(
        "--pretrain-epochs", default=None, metavar="N", group=_MODEL,
        help="before fine-tuning, pretrain the encoder for N epochs by predicting masked nucleotides of the training "
             "sequences (labels, dev and test unused; into <member>/pretrain/); 0 = none "
             f"(default: {_per_task('pretrain_epochs')}, 0 otherwise)")
    pretrain_mask: float | None = flag(
        "--pretrain-mask", default=None, metavar="P", group=_MODEL,
        help="fraction of the nucleotides of each sequence masked in pretraining "
             f"(default: {_per_task('pretrain_mask')}, {MASK_PROBABILITY:g} otherwise)")
    finetune_mask: float | None = flag(
        "--finetune-mask", default=None, metavar="P", group=_MODEL,
        help="fraction of the nucleotides of each fine-tuning batch masked as in pretraining, an augmentation, with "
             f"or without pretraining; 0 = none (default: {FINETUNE_MASK:g})")
    rc_augment: bool | None = flag("--rc-augment", default=None, action="boolean", group=_MODEL,
                                   help="train on random reverse complements (default: off for the GUE tasks, whose "
                                        "sequences are oriented on the TSS; on otherwise)")
    strand: str | None = flag("--strand", default=None, choices=("both", "forward"), group=_MODEL,
                              help="what the model predicts from: the mean of both strands, or the forward strand "
                                   "(default: both with --rc-augment, else forward)")
    seeds: tuple[int, ...] | None = seeds_flag(group=_ENSEMBLES)
    cv: int | None = cv_flag(pool="train + dev (grouped by sequence)", group=_ENSEMBLES,
                             default="off; ecoli_sigma70: 5")
    cv_repeats: int = cv_repeats_flag(group=_ENSEMBLES)
    no_length_buckets: bool = flag("--no-length-buckets", default=False, group=_MODEL,
                                   help="shuffle training batches without grouping similar lengths (default: group "
                                        "them when lengths vary)")
    train_config: Mapping[str, Any] = training_flags(
        DEFAULTS, unset=("epochs", "lr"),
        epochs_help=(f"maximum epochs (default: {DEFAULTS.max_epochs} for the GUE tasks, {SMALL_DATA_EPOCHS} for "
                     "ecoli_sigma70 and your own files)"),
        lr_help=(f"peak learning rate of the fine-tuning (default after pretraining: {_per_task('finetune_lr')}, "
                 f"{TASK_RECIPES[None].finetune_lr:g} otherwise; {DEFAULTS.lr:g} without; pretraining itself peaks at "
                 f"{PRETRAIN_LR:g})"))
    resume: bool = False
    overwrite: bool = False
    device: str = device_flag()

    def options(self) -> tuple[PromoterOptions, TrainConfig]:
        """The :class:`~bioattn.tasks.promoter.train.PromoterOptions` of these flags and the
        :class:`~bioattn.training.TrainConfig` (the task's default epochs and learning rate where the flags and the
        ``--config`` file leave them unset)."""
        from bioattn.tasks.promoter.train import PromoterOptions, default_epochs, default_lr
        from bioattn.training.config import config_from_values

        fields = values(self)
        for name in ("strand", "no_length_buckets", "train_config", "device"):
            del fields[name]
        options = PromoterOptions(**fields, rc_average=_RC_AVERAGE[self.strand],
                                  length_buckets=not self.no_length_buckets)
        return options, config_from_values(self.train_config, DEFAULTS, max_epochs=default_epochs(options.task),
                                           lr=default_lr(options.task, options.pretrain_epochs))

    def run(self) -> int:
        from bioattn.distributed import is_main_process
        from bioattn.tasks.promoter.report import format_report
        from bioattn.tasks.promoter.task import TASK

        options, config = self.options()
        metrics = TASK.run(options, config)
        if is_main_process():
            print(format_report(metrics))
            print(f"model, metrics.json, summary.md and training_curve.png written to {options.out}")
        return 0


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

    model: str | None = model_flag(trained_by=_TRAINED_BY)
    device: str = device_flag()
    input: Path = flag("--input", required=True,
                       help="FASTA or CSV (with a 'sequence' column), optionally .gz; '-': standard input (not with "
                            "--window)")
    output: Path = flag("--output", required=True,
                        help="file to write: CSV per sequence ('-': standard output); with --window .bedGraph, .bw, "
                             ".bed or .csv")
    batch_size: int | None = flag("--batch-size", default=None,
                                  help="sequences per forward pass (default: 256; a genome scan: 512 on a CPU, 4096 "
                                       "on a GPU)")
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
                              metavar="NT", group=_SCAN,
                              help="scan long sequences in windows of NT nt, at most the model's max_len; '--window' "
                                   "alone: the model's max_len (default: no scan, one row per sequence)")
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
    compile: bool = flag("--compile", default=False, group=_SCAN,
                         help="run the scan's model through torch.compile (CUDA graphs on a GPU): pays on long GPU "
                              "scans, costs a minute of compiling (default: off)")

    def run(self) -> int:
        from bioattn.tasks.promoter.predict_run import predict_promoter

        result = predict_promoter(self.model, self.input, self.output, chroms=self.chrom, compile_model=self.compile,
                                  **values(self, "batch_size", "precision", "threshold", "strand", "window", "stride",
                                           "scan_class", "regions", "device"))
        if not result.written:  # another process of a torchrun scan writes the merged output
            return 0
        print(result.describe(self.output), file=sys.stderr)
        return 0
