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
from __future__ import annotations

import argparse
from pathlib import Path

from bioattn.tasks.promoter.train import (
    DEFAULT_TASK,
    DEFAULTS,
    FINETUNE_MASK,
    SMALL_DATA_EPOCHS,
    TASK_RECIPES,
    TASKS,
    PromoterOptions,
    TaskRecipe,
    default_epochs,
    default_lr,
    format_report,
    run_promoter,
)
from bioattn.tasks.promoter.pretrain import MASK_PROBABILITY, PRETRAIN_LR
from bioattn.commands.common import add_device_argument, add_ensemble_arguments, ensemble_options
from bioattn.commands.training_args import add_training_args, config_from_args
from bioattn.commands.vocabulary import add_alias
from bioattn.training.distributed import is_main_process


def add_arguments(parser: argparse.ArgumentParser) -> None:
    data = parser.add_argument_group("data")
    source = data.add_mutually_exclusive_group()
    source.add_argument("--task", choices=TASKS, default=None,
                        help=f"bundled benchmark (default: {DEFAULT_TASK} when no --train is given)")
    source.add_argument("--train", type=Path, default=None, metavar="FILE",
                        help="your own labelled FASTA ('>id label=X') or CSV/TSV (sequence,label[,id]), .gz ok (default: none)")
    data.add_argument("--dev", type=Path, default=None, metavar="FILE",
                      help="dev file for early stopping (default: a stratified 10%% of --train)")
    data.add_argument("--test", type=Path, default=None, metavar="FILE", help="also score this file (default: none)")
    data.add_argument("--max-length", type=int, default=None, metavar="NT",
                      help="longest sequence the model accepts (default: the longest training sequence)")
    data.add_argument("--data-root", default=None, help="data folder of the bundled tasks (default: $BIOATTN_DATA_ROOT, else ../shared/data)")
    data.add_argument("--max-rows", type=int, default=None, help=argparse.SUPPRESS)  # cap per split (tests)
    parser.add_argument("--out", type=Path, required=True, help="run directory to create")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: tiny model, at most 1500 rows per split, 2 short epochs (about a minute on 2 cores); "
                             "without a data root, prom_core_all comes from the embedded sample (default: off)")
    model = parser.add_argument_group("model")
    width = model.add_argument("--embed-dim", dest="d_model", type=int, default=64,
                               help="model width (token size) (default: %(default)s)")
    add_alias(model, width, "--d-model")
    model.add_argument("--heads", type=int, default=4, help="attention heads (default: %(default)s)")
    model.add_argument("--layers", type=int, default=2, help="transformer layers (default: %(default)s)")
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
    strand = model.add_argument("--strand", choices=("both", "forward"), default=None,
                                help="what the model predicts from: the mean of both strands, or the forward strand "
                                     "(default: both with --rc-augment, else forward)")
    add_alias(model, strand, "--rc-average", value="both")
    add_alias(model, strand, "--no-rc-average", value="forward")
    add_ensemble_arguments(parser, cv_pool="train + dev (grouped by sequence)", cv_default="off; ecoli_sigma70: 5")
    model.add_argument("--no-length-buckets", action="store_true",
                       help="shuffle training batches without grouping similar lengths (default: group them when lengths vary)")
    add_training_args(parser, DEFAULTS)
    add_device_argument(parser)
    parser.set_defaults(epochs=None, lr=None)  # the task's: see --help of --epochs and --lr
    for action in parser._actions:
        if action.dest == "epochs":
            action.help = (f"maximum epochs (default: {DEFAULTS.max_epochs} for the GUE tasks, {SMALL_DATA_EPOCHS} for "
                           "ecoli_sigma70 and your own files)")
        if action.dest == "lr":
            action.help = (f"peak learning rate of the fine-tuning (default after pretraining: "
                           f"{_per_task('finetune_lr')}, {TaskRecipe().finetune_lr:g} otherwise; {DEFAULTS.lr:g} "
                           f"without; pretraining itself peaks at {PRETRAIN_LR:g})")


def _per_task(field: str) -> str:
    """``"12 for prom_core_all, 4 for prom_core_notata, ..."``: the tasks' recipe values of ``field``."""
    return ", ".join(f"{getattr(recipe, field):g} for {task}" for task, recipe in TASK_RECIPES.items())


def options_from_args(args: argparse.Namespace) -> PromoterOptions:
    """The :class:`PromoterOptions` of parsed command-line flags."""
    return PromoterOptions(
        out=args.out, task=args.task, train=args.train, dev=args.dev, test=args.test, data_root=args.data_root,
        max_length=args.max_length, quick=args.quick, max_rows=args.max_rows, d_model=args.d_model, heads=args.heads,
        layers=args.layers, conv_kernel=args.conv_kernel, conv_layers=args.conv_layers, dropout=args.dropout,
        head_temperature=args.head_temperature, pretrain_epochs=args.pretrain_epochs, pretrain_mask=args.pretrain_mask,
        finetune_mask=args.finetune_mask,
        rc_augment=args.rc_augment, rc_average={None: None, "both": True, "forward": False}[args.strand], length_buckets=not args.no_length_buckets,
        **ensemble_options(args), resume=args.resume, overwrite=args.overwrite,
    )


def run(args: argparse.Namespace) -> int:
    options = options_from_args(args)
    if args.epochs is None:
        args.epochs = default_epochs(options.task)
    if args.lr is None:
        args.lr = default_lr(options.task, options.pretrain_epochs)
    metrics = run_promoter(options, config_from_args(args, DEFAULTS))
    if is_main_process():
        print(format_report(metrics))
        print(f"model, metrics.json, summary.md and training_curve.png written to {options.out}")
    return 0
