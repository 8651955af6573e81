"""The flags of ``bioattn train|predict promoter`` and what they become: :class:`PromoterOptions` and a
:class:`~bioattn.training.TrainConfig` for training; prediction passes its flags straight to
:func:`~bioattn.tasks.promoter.predict_run.predict_promoter` (explanation's: :mod:`bioattn.commands.promoter_explain_args`).

The task layer is imported when the flags are added (``train promoter --help`` lists the per-task defaults), not
when this module is.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from bioattn.commands.common import (
    add_ensemble_arguments, add_model_and_device_arguments, add_size_arguments, add_training_and_device_arguments,
    ensemble_options,
)
from bioattn.commands.training_args import config_from_args

if TYPE_CHECKING:
    from bioattn.tasks.promoter.train import PromoterOptions
    from bioattn.training import TrainConfig


# ---------------------------------------------------------------------------------------------- train promoter
def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``bioattn train promoter``."""
    from bioattn.tasks.promoter.pretrain import MASK_PROBABILITY, PRETRAIN_LR
    from bioattn.tasks.promoter.train import (
        DEFAULT_TASK, DEFAULTS, FINETUNE_MASK, SMALL_DATA_EPOCHS, TASK_RECIPES, TASKS,
    )

    data = parser.add_argument_group("data")
    source = data.add_mutually_exclusive_group()
    source.add_argument("--task", choices=TASKS, default=None,
                        help=f"bundled benchmark (default: {DEFAULT_TASK} when no --train is given)")
    source.add_argument("--train", type=Path, default=None, metavar="FILE",
                        help="your own labelled FASTA ('>id label=X') or CSV/TSV (sequence,label[,id]), .gz ok (default: none)")
    data.add_argument("--dev", type=Path, default=None, metavar="FILE",
                      help="dev file for early stopping (default: a stratified 10%% of --train)")
    data.add_argument("--test", type=Path, default=None, metavar="FILE", help="also score this file (default: none)")
    data.add_argument("--positive-class", default=None, metavar="NAME",
                      help="--train with two labels: the positive class, the one AUROC, MCC and p_<class> are about "
                           "(default: the label that is not normal/negative/control/healthy/benign/background/absent/"
                           "no/false/0, else the second in sorted order; named on stderr and saved with the model)")
    data.add_argument("--max-length", type=int, default=None, metavar="NT",
                      help="longest sequence the model accepts (default: the longest training sequence)")
    data.add_argument("--data-root", default=None, help="data folder of the bundled tasks (default: $BIOATTN_DATA_ROOT, else ../shared/data)")
    data.add_argument("--max-rows", type=int, default=None, help=argparse.SUPPRESS)  # cap per split (tests)
    parser.add_argument("--out", type=Path, required=True, help="run directory to create")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: tiny model, at most 1500 rows per split, 2 short epochs (about a minute on 2 cores); "
                             "without a data root, prom_core_all comes from the embedded sample (default: off)")
    model = parser.add_argument_group("model")
    add_size_arguments(model, embed_dim=64, heads=4, layers=2)
    model.add_argument("--conv-kernel", type=int, default=15, help="odd kernel of the conv embedding, 0 = off (default: %(default)s)")
    model.add_argument("--conv-layers", type=int, default=1, help="residual conv embedding blocks (default: %(default)s)")
    model.add_argument("--dropout", type=float, default=None,
                       help="dropout of the residual branches and the head (default: 0 for the GUE tasks; 0.1 for "
                            "ecoli_sigma70 and your own files)")
    model.add_argument("--head-temperature", action="store_true",
                       help="learn one softmax temperature per attention head (num_heads parameters per layer; "
                            "identity at initialisation) (default: off)")
    model.add_argument("--pretrain-epochs", type=int, default=None, metavar="N",
                       help="before fine-tuning, pretrain the encoder for N epochs by predicting masked nucleotides of "
                            "the training sequences (labels, dev and test unused; into <member>/pretrain/); 0 = none "
                            f"(default: {_per_task('pretrain_epochs')}, 0 otherwise)")
    model.add_argument("--pretrain-mask", type=float, default=None, metavar="P",
                       help="fraction of the nucleotides of each sequence masked in pretraining "
                            f"(default: {_per_task('pretrain_mask')}, {MASK_PROBABILITY:g} otherwise)")
    model.add_argument("--finetune-mask", type=float, default=None, metavar="P",
                       help="fraction of the nucleotides of each fine-tuning batch masked as in pretraining, an "
                            f"augmentation, with or without pretraining; 0 = none (default: {FINETUNE_MASK:g})")
    model.add_argument("--rc-augment", action=argparse.BooleanOptionalAction, default=None,
                       help="train on random reverse complements (default: off for the GUE tasks, whose sequences are "
                            "oriented on the TSS; on otherwise)")
    model.add_argument("--strand", choices=("both", "forward"), default=None,
                                help="what the model predicts from: the mean of both strands, or the forward strand "
                                     "(default: both with --rc-augment, else forward)")
    add_ensemble_arguments(parser, cv_pool="train + dev (grouped by sequence)", cv_default="off; ecoli_sigma70: 5")
    model.add_argument("--no-length-buckets", action="store_true",
                       help="shuffle training batches without grouping similar lengths (default: group them when lengths vary)")
    add_training_and_device_arguments(
        parser, DEFAULTS,
        epochs_help=(f"maximum epochs (default: {DEFAULTS.max_epochs} for the GUE tasks, {SMALL_DATA_EPOCHS} for "
                     "ecoli_sigma70 and your own files)"),
        lr_help=(f"peak learning rate of the fine-tuning (default after pretraining: {_per_task('finetune_lr')}, "
                 f"{TASK_RECIPES[None].finetune_lr:g} otherwise; {DEFAULTS.lr:g} without; pretraining itself peaks at "
                 f"{PRETRAIN_LR:g})"))
    parser.set_defaults(epochs=None, lr=None)  # the task's: see --help of --epochs and --lr


def _per_task(field: str) -> str:
    """``"12 for prom_core_all, 4 for prom_core_notata, ..."``: the tasks' recipe values of ``field``."""
    from bioattn.tasks.promoter.train import TASK_RECIPES

    own = getattr(TASK_RECIPES[None], field)
    return ", ".join(f"{getattr(recipe, field):g} for {task}" for task, recipe in TASK_RECIPES.items()
                     if task is not None and getattr(recipe, field) != own)


def train_options_from_args(args: argparse.Namespace) -> tuple[PromoterOptions, TrainConfig]:
    """The :class:`PromoterOptions` and the :class:`TrainConfig` of parsed ``bioattn train promoter`` flags (the
    task's default epochs and learning rate where the flags leave them unset); ``args`` is not changed."""
    from bioattn.tasks.promoter.train import DEFAULTS, PromoterOptions, default_epochs, default_lr

    options = PromoterOptions(
        out=args.out, task=args.task, train=args.train, dev=args.dev, test=args.test, data_root=args.data_root,
        max_length=args.max_length, quick=args.quick, max_rows=args.max_rows, embed_dim=args.embed_dim, heads=args.heads,
        layers=args.layers, conv_kernel=args.conv_kernel, conv_layers=args.conv_layers, dropout=args.dropout,
        head_temperature=args.head_temperature, pretrain_epochs=args.pretrain_epochs, pretrain_mask=args.pretrain_mask,
        finetune_mask=args.finetune_mask,
        rc_augment=args.rc_augment, rc_average={None: None, "both": True, "forward": False}[args.strand], length_buckets=not args.no_length_buckets,
        positive_class=args.positive_class,
        **ensemble_options(args), resume=args.resume, overwrite=args.overwrite,
    )
    return options, config_from_args(args, DEFAULTS, max_epochs=default_epochs(options.task),
                                     lr=default_lr(options.task, options.pretrain_epochs))


# -------------------------------------------------------------------------------------------- predict promoter
def _window_length(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def add_predict_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``bioattn predict promoter``."""
    from bioattn.precision import INFERENCE_PRECISIONS
    from bioattn.tasks.promoter.predict_run import MODEL_WINDOW

    add_model_and_device_arguments(parser, trained_by="bioattn train promoter")
    parser.add_argument("--input", type=Path, required=True,
                        help="FASTA or CSV (with a 'sequence' column), optionally .gz; '-': standard input (not with --window)")
    parser.add_argument("--output", type=Path, required=True,
                        help="file to write: CSV per sequence ('-': standard output); with --window .bedGraph, .bw, .bed or .csv")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="sequences per forward pass (default: 256; a genome scan: 512 on a CPU, 4096 on a GPU)")
    parser.add_argument("--precision", choices=INFERENCE_PRECISIONS, default=None,
                        help="fp32: exactly the training run's evaluation; bf16: bf16 autocast (faster where the CPU or GPU "
                             "has bf16 units; probabilities differ from fp32 by rounding, so a label near the "
                             "threshold may change); auto: bf16 where the CPU or GPU has bf16 units, else fp32 "
                             "(default: fp32 for sequences, auto for a genome scan)")
    parser.add_argument("--threshold", type=float, default=None,
                        help="probability from which a two-class model predicts its positive class, and the BED cut-off "
                             "of a scan (default: the model's, normally 0.5)")
    parser.add_argument("--strand", choices=("model", "both", "forward"), default="model",
                                 help="score as the model was trained (normally the mean of both strands), the mean of "
                                      "both strands, or the given strand only (default: %(default)s)")
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
