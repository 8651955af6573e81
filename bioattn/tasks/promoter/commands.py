"""The ``bioattn train promoter`` command: its options (:func:`bioattn.options.flag`) and its run."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from bioattn.options import flag, training_flags, values
from bioattn.tasks.flags import cv_flag, cv_repeats_flag, device_flag, seeds_flag
from bioattn.tasks.promoter.pretrain import MASK_PROBABILITY, PRETRAIN_LR
from bioattn.tasks.promoter.train import DEFAULT_TASK, DEFAULTS, FINETUNE_MASK, SMALL_DATA_EPOCHS, TASK_RECIPES, TASKS

if TYPE_CHECKING:
    from bioattn.tasks.promoter.train import PromoterOptions
    from bioattn.training import TrainConfig

_DATA, _MODEL, _ENSEMBLES = "data", "model", "ensembles (one of)"
#: ``--strand`` of ``train promoter`` -> :attr:`PromoterOptions.rc_average`.
_RC_AVERAGE = {None: None, "both": True, "forward": False}


def _per_task(field: str) -> str:
    """``"12 for prom_core_all, 4 for prom_core_notata, ..."``: the tasks' recipe values of ``field``."""
    own = getattr(TASK_RECIPES[None], field)
    return ", ".join(f"{getattr(recipe, field):g} for {task}" for task, recipe in TASK_RECIPES.items()
                     if task is not None and getattr(recipe, field) != own)


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
        "--positive-class", default=None, metavar="NAME", group=_DATA, help="--train with two labels: the positive "
        "class, the one AUROC, MCC and p_<class> are about (default: the label that is not normal/negative/control/"
        "healthy/benign/background/absent/no/false/0, else the second in sorted order; named on stderr and saved with "
        "the model)")
    max_length: int | None = flag("--max-length", default=None, metavar="NT", group=_DATA,
                                  help="longest sequence the model accepts (default: the longest training sequence)")
    data_root: str | None = flag("--data-root", default=None, group=_DATA, help="data folder of the bundled tasks "
                                 "(default: $BIOATTN_DATA_ROOT, else ../shared/data)")
    max_rows: int | None = flag("--max-rows", default=None, group=_DATA, hidden=True, help="cap per split (tests)")
    out: Path = flag("--out", required=True, help="run directory to create")
    quick: bool = flag("--quick", default=False,
                       help="smoke test: tiny model, at most 1500 rows per split, 2 short epochs (about a minute on 2 "
                            "cores); without a data root, prom_core_all comes from the embedded sample (default: off)")
    embed_dim: int = flag("--embed-dim", default=64, group=_MODEL,
                          help="model width (token size) (default: %(default)s)")
    heads: int = flag("--heads", default=4, group=_MODEL, help="attention heads (default: %(default)s)")
    layers: int = flag("--layers", default=2, group=_MODEL, help="transformer layers (default: %(default)s)")
    conv_kernel: int = flag("--conv-kernel", default=15, group=_MODEL,
                            help="odd kernel of the conv embedding, 0 = off (default: %(default)s)")
    conv_layers: int = flag("--conv-layers", default=1, group=_MODEL,
                            help="residual conv embedding blocks (default: %(default)s)")
    dropout: float | None = flag("--dropout", default=None, group=_MODEL, help="dropout of the residual branches and "
                                 "the head (default: 0 for the GUE tasks; 0.1 for ecoli_sigma70 and your own files)")
    head_temperature: bool = flag("--head-temperature", default=False, group=_MODEL,
                                  help="learn one softmax temperature per attention head (num_heads parameters per "
                                       "layer; identity at initialisation) (default: off)")
    pretrain_epochs: int | None = flag(
        "--pretrain-epochs", default=None, metavar="N", group=_MODEL, help="before fine-tuning, pretrain the encoder "
        "for N epochs by predicting masked nucleotides of the training sequences (labels, dev and test unused; into "
        f"<member>/pretrain/); 0 = none (default: {_per_task('pretrain_epochs')}, 0 otherwise)")
    pretrain_mask: float | None = flag(
        "--pretrain-mask", default=None, metavar="P", group=_MODEL, help="fraction of the nucleotides of each sequence "
        f"masked in pretraining (default: {_per_task('pretrain_mask')}, {MASK_PROBABILITY:g} otherwise)")
    finetune_mask: float | None = flag(
        "--finetune-mask", default=None, metavar="P", group=_MODEL, help="fraction of the nucleotides of each "
        f"fine-tuning batch masked as in pretraining, an augmentation, with or without pretraining; 0 = none (default: "
        f"{FINETUNE_MASK:g})")
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
    no_length_buckets: bool = flag("--no-length-buckets", default=False, group=_MODEL, help="shuffle training "
                                   "batches without grouping similar lengths (default: group them when lengths vary)")
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
        """The :class:`~bioattn.tasks.promoter.train.PromoterOptions` and the TrainConfig of these flags."""
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
