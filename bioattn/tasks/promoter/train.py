"""The promoter task: options, recipes, data loading and the fit of one DNA classifier."""
from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bioattn.data.root import EMBEDDED_SAMPLE, EMBEDDED_SAMPLE_TASKS, embedded_sample_dir, resolve_data_root
from bioattn.data.dna import reverse_complement_ids
from bioattn.errors import UserInputError
from bioattn.metrics import classification_metrics, with_prefix
from bioattn.models.ensemble import Ensemble
from bioattn.models.promoter import PromoterClassifier
from bioattn.tasks.common import Recipe, TaskOptions, fit_timed, recipe_for
from bioattn.tasks.promoter.pretrain import MASK_PROBABILITY, PRETRAIN_DIR, mask_nucleotides, pretrain_encoder
from bioattn.tasks.promoter.data import (BINARY_CLASSES, Split, TokenDataset, check_max_length, collate, dev_split,
                                         load_ecoli, load_gue, load_labelled_files)
from bioattn.training import TrainConfig, Trainer, plot_curves, seed_everything
from bioattn.distributed import is_main_process

GUE_TASKS = ("prom_core_all", "prom_core_notata", "prom_core_tata", "prom_300_tata")
ECOLI_TASK = "ecoli_sigma70"
TASKS = (*GUE_TASKS, ECOLI_TASK)
DEFAULT_TASK = "prom_core_all"
CV_FOLDS = 5
QUICK_ROWS = 1500
MODEL_NAME = "PromoterClassifier (this run)"
ENSEMBLE_NAME = "ensemble of {n} {kind} (this run)"
MEMBERS_NAME = "PromoterClassifier, mean ± sd over {kind} (this run)"
#: At least this many fine-tuning steps (a small training set trains more epochs).
SMALL_DATA_MIN_STEPS = 300
DEFAULTS = TrainConfig(max_epochs=6, batch_size=64, lr=3e-3, weight_decay=0.01, schedule="warmup_cosine",
                       warmup_steps=100, grad_clip=1.0, patience=8, monitor="dev_mcc", monitor_mode="max",
                       min_steps=SMALL_DATA_MIN_STEPS)
#: Epochs and dropout of the tasks with small training sets (E. coli, your own files).
SMALL_DATA_EPOCHS = 12
SMALL_DATA_DROPOUT = 0.1
#: Peak learning rate of the fine-tuning after pretraining unless the task's :class:`TaskRecipe` says otherwise.
FINETUNE_LR = 1e-3
#: Fraction of the nucleotides of each fine-tuning batch masked as in pretraining (an augmentation), every task.
FINETUNE_MASK = 0.1


@dataclass(frozen=True)
class TaskRecipe(Recipe):
    """A task's defaults (:class:`~bioattn.tasks.common.Recipe`) plus its pretraining and fine-tuning after it."""

    pretrain_epochs: int = 0
    pretrain_mask: float = MASK_PROBABILITY
    finetune_lr: float = FINETUNE_LR
    finetune_mask: float = FINETUNE_MASK


_GUE = "GUE task (40k+ training sequences oriented on the TSS)"
_SMALL = "a small training set"
_SMALL_DATA_CONFIG = dataclasses.replace(DEFAULTS, max_epochs=SMALL_DATA_EPOCHS)
#: Default recipe per task; ``None``: your own files.
TASK_RECIPES: dict[str | None, TaskRecipe] = {
    "prom_core_all": TaskRecipe(DEFAULTS, _GUE, pretrain_epochs=12, pretrain_mask=0.3, finetune_lr=2e-3),
    "prom_core_notata": TaskRecipe(DEFAULTS, _GUE, pretrain_epochs=4),
    "prom_core_tata": TaskRecipe(DEFAULTS, _GUE, pretrain_epochs=12, pretrain_mask=0.3, finetune_lr=2e-3),
    "prom_300_tata": TaskRecipe(DEFAULTS, _GUE),
    "ecoli_sigma70": TaskRecipe(_SMALL_DATA_CONFIG, _SMALL),
    None: TaskRecipe(_SMALL_DATA_CONFIG, "your own files"),
}


def task_recipe(task: str | None) -> TaskRecipe:
    """The default :class:`TaskRecipe` of ``task`` (``None``: your own files)."""
    return recipe_for(TASK_RECIPES, task, flag="--task", default=None)


def default_epochs(task: str | None) -> int:
    """Default maximum epochs of ``task`` (``None``: your own files)."""
    return task_recipe(task).train_config.max_epochs


def default_lr(task: str | None, pretrain_epochs: int) -> float:
    """Default peak learning rate of ``task``: its recipe's ``finetune_lr`` after pretraining, else from scratch."""
    recipe = task_recipe(task)
    return recipe.finetune_lr if pretrain_epochs else recipe.train_config.lr


def default_config(task: str | None, pretrain_epochs: int = 0) -> TrainConfig:
    """The recipe's ``train_config`` of ``task`` with :func:`default_lr`."""
    return dataclasses.replace(task_recipe(task).train_config, lr=default_lr(task, pretrain_epochs))


# Published MCC×100 on the official GUE test split (DNABERT-2 paper; data_cards/gue_promoters.md).
PUBLISHED_GUE = {
    "DNABERT (3-mer)": {"prom_core_all": 70.92, "prom_core_notata": 69.82, "prom_core_tata": 78.15, "prom_300_tata": 69.83},
    "DNABERT (6-mer)": {"prom_core_all": 68.90, "prom_core_notata": 70.47, "prom_core_tata": 76.06, "prom_300_tata": 61.56},
    "NT-500M-human": {"prom_core_all": 63.45, "prom_core_notata": 64.82, "prom_core_tata": 71.34, "prom_300_tata": 78.07},
    "NT-2500M-multi": {"prom_core_all": 70.33, "prom_core_notata": 71.58, "prom_core_tata": 72.97, "prom_300_tata": 79.43},
    "DNABERT-2 (117M)": {"prom_core_all": 69.37, "prom_core_notata": 68.04, "prom_core_tata": 74.17, "prom_300_tata": 71.59},
}

Scores = dict[str, dict[str, Any]]  # {method: {split: metrics}}


@dataclass(frozen=True)
class PromoterOptions(TaskOptions):
    """What to train and how (the run options are :class:`~bioattn.tasks.common.TaskOptions`').

    Args:
        task / train, dev, test: a bundled benchmark (default ``prom_core_all``) or own labelled FASTA/CSV files.
        max_length: longest sequence accepted (default: the longest training sequence).
        pretrain_epochs, pretrain_mask, finetune_mask: masked-nucleotide pretraining and fine-tuning augmentation
            (default: the task's :class:`TaskRecipe`).
        rc_augment, rc_average: train on random reverse complements / predict from both strands (default: off for
            the GUE tasks, on otherwise).
        length_buckets: batch training sequences of similar length together.
        positive_class: own files with two labels: the positive class (:func:`~bioattn.metrics.order_binary_classes`).
    """

    task: str | None = None
    train: Path | None = None
    dev: Path | None = None
    test: Path | None = None
    max_length: int | None = None
    max_rows: int | None = None
    embed_dim: int = 64
    heads: int = 4
    layers: int = 2
    conv_kernel: int = 15
    conv_layers: int = 1
    dropout: float | None = None
    head_temperature: bool = False
    pretrain_epochs: int | None = None
    pretrain_mask: float | None = None
    finetune_mask: float | None = None
    rc_augment: bool | None = None
    rc_average: bool | None = None
    length_buckets: bool = True
    positive_class: str | None = None

    def __post_init__(self) -> None:
        if self.train is not None and self.task is not None:
            raise UserInputError("choose a bundled --task or your own --train file, not both")
        if self.positive_class is not None and self.train is None:
            raise UserInputError("--positive-class applies to your own --train file (a bundled task's classes are fixed)")
        if self.train is None and (self.dev is not None or self.test is not None):
            raise UserInputError("--dev and --test need a --train file")
        if self.train is None and self.task is None:
            object.__setattr__(self, "task", DEFAULT_TASK)
        if self.train is None and self.task not in TASKS:
            raise UserInputError(f"unknown task {self.task!r}; choose one of {', '.join(TASKS)} or pass --train FILE")
        if self.max_length is not None and self.max_length < 1:
            raise UserInputError(f"--max-length must be >= 1, got {self.max_length}")
        for field in ("pretrain_epochs", "pretrain_mask", "finetune_mask"):
            if getattr(self, field) is None:
                object.__setattr__(self, field, getattr(task_recipe(self.task), field))
        if self.pretrain_epochs < 0:
            raise UserInputError(f"--pretrain-epochs must be >= 0, got {self.pretrain_epochs}")
        if not 0 < self.pretrain_mask < 1:
            raise UserInputError(f"--pretrain-mask must be between 0 and 1 (a fraction), got {self.pretrain_mask}")
        if not 0 <= self.finetune_mask < 1:
            raise UserInputError(f"--finetune-mask must be at least 0 and below 1 (a fraction), got {self.finetune_mask}")
        self.check_run_options()
        if self.dropout is None:
            object.__setattr__(self, "dropout", 0.0 if self.task in GUE_TASKS else SMALL_DATA_DROPOUT)
        if self.rc_augment is None:
            object.__setattr__(self, "rc_augment", self.task not in GUE_TASKS)
        if self.rc_average is None:
            object.__setattr__(self, "rc_average", self.rc_augment)

    @property
    def name(self) -> str:
        """The task's name in reports: the benchmark, or the training file's name."""
        return self.task if self.task is not None else Path(self.train).name  # type: ignore[arg-type]


def quick_options(options: PromoterOptions) -> PromoterOptions:
    """The smoke-test options: a tiny model, at most :data:`QUICK_ROWS` rows per split, 2 pretraining epochs."""
    return dataclasses.replace(options, embed_dim=32, heads=2, layers=1, pretrain_epochs=min(options.pretrain_epochs, 2),
                               max_rows=QUICK_ROWS if options.max_rows is None else options.max_rows)


def quick_config(config: TrainConfig) -> TrainConfig:
    """The smoke-test schedule: at most 2 epochs of 15 steps (no minimum number of steps)."""
    return dataclasses.replace(config, max_epochs=min(config.max_epochs, 2), max_steps_per_epoch=15,
                               batch_size=min(config.batch_size, 64), warmup_steps=5, min_steps=0)


def build_model(options: PromoterOptions, max_len: int, class_names: list[str]) -> PromoterClassifier:
    """The classifier of ``options`` (after :func:`quick_options` for a ``quick`` run) for ``class_names``."""
    try:
        return PromoterClassifier(
            max_len=max_len, embed_dim=options.embed_dim, num_heads=options.heads, num_layers=options.layers,
            conv_kernel=options.conv_kernel, conv_layers=options.conv_layers, dropout=options.dropout,
            head_temperature=options.head_temperature, rc_average=options.rc_average, num_classes=len(class_names),
            class_names=class_names)
    except ValueError as exc:
        raise UserInputError(f"invalid model options: {exc}") from exc


def classification_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Mean loss: binary cross-entropy for ``logits (B,)``, softmax cross-entropy for ``(B, C)``; ``labels (B,)`` long."""
    binary = logits.dim() == 1
    return F.binary_cross_entropy_with_logits(logits, labels.float()) if binary else F.cross_entropy(logits, labels)


def score(model: PromoterClassifier, split: Split) -> dict[str, float]:
    """``classification_metrics`` of the model's (strand-averaged if configured) predictions on ``split``."""
    return classification_metrics(split.labels, model.predict_tokens(split.tokens, batch_size=512), threshold=model.threshold)


def train_model(train: Split, dev: Split, evals: Mapping[str, Split], run_dir: Path, config: TrainConfig,
                options: PromoterOptions, max_len: int, class_names: list[str],
                resume: bool) -> tuple[PromoterClassifier, dict[str, Any]]:
    """Train on ``train`` (early stopping on ``dev``) into ``run_dir``; the model and the fit summary."""
    seed_everything(config.seed)
    model = build_model(options, max_len, class_names)
    lengths = train.lengths()
    buckets = lengths.tolist() if options.length_buckets and lengths.min() != lengths.max() else None
    pretraining = pretrain_encoder(model, train, run_dir / PRETRAIN_DIR, config, options.pretrain_epochs, resume,
                                   quick=options.quick, mask_probability=options.pretrain_mask, bucket_lengths=buckets,
                                   run_info=dataclasses.asdict(options)) if options.pretrain_epochs else None

    def loss_fn(module: nn.Module, batch: tuple[Tensor, Tensor, Tensor]) -> Tensor:
        ids, padding_mask, labels = batch
        if options.rc_augment:
            flip = torch.rand(ids.shape[0], device=ids.device) < 0.5
            ids = torch.where(flip[:, None], reverse_complement_ids(ids, padding_mask), ids)
        if options.finetune_mask:
            ids, _ = mask_nucleotides(ids, probability=options.finetune_mask)
        return classification_loss(module(ids, padding_mask), labels)

    def evaluate(module: nn.Module) -> dict[str, float]:
        return with_prefix("dev", score(module, dev))  # type: ignore[arg-type]

    trainer = Trainer(model, TokenDataset(train), config, run_dir, loss_fn=loss_fn, evaluate=evaluate, collate_fn=collate,
                      resume=resume, run_info=dataclasses.asdict(options), bucket_lengths=buckets)
    _, info = fit_timed(trainer)
    if pretraining is not None:
        info["pretraining"] = pretraining
    if is_main_process():
        info["scores"] = {name: score(model, split) for name, split in evals.items()}
        model.save_pretrained(run_dir)
        plot_curves(run_dir)
    return model, info


@dataclass
class PromoterData:
    """Loaded, checked data of a run: ``splits`` (``train``, ``dev``[, ``test``], or ``all`` for cross-validation)."""

    splits: dict[str, Split]
    class_names: list[str]
    max_len: int
    protocol: str
    data_root: str | None = None


def resolve_max_length(splits: Mapping[str, Split], requested: int | None) -> int:
    """``requested``, else the longest training sequence; every sequence of ``splits`` must fit."""
    if requested is not None:
        check_max_length(splits, requested, f"--max-length {requested}")
        return requested
    longest = int(next(iter(splits.values())).lengths().max())
    check_max_length(splits, longest, f"the longest training sequence ({longest} nt); allow longer ones with --max-length")
    return longest


def gue_task_dir(options: PromoterOptions) -> tuple[Path, str]:
    """The folder of ``options.task`` and its data root (:data:`EMBEDDED_SAMPLE` for a ``quick`` run without data)."""
    may_use_sample = options.quick and options.task in EMBEDDED_SAMPLE_TASKS
    try:
        root = resolve_data_root(options.data_root)
    except UserInputError as exc:
        if not may_use_sample:
            raise
        missing = str(exc)
    else:
        task_dir = root / "promoters" / "gue" / str(options.task)
        if task_dir.is_dir() or not may_use_sample:
            return task_dir, str(root)
        missing = f"{task_dir}: task folder not found"
    capped = f"; --quick trains on a seeded random {options.max_rows:,} of its 2,000 train sequences" if (
        options.max_rows is not None and options.max_rows < 2000) else ""
    print(f"{missing}\n--quick: using the {EMBEDDED_SAMPLE} of GUE {options.task} shipped with bioattn "
          f"(2,000 train + 500 dev sequences), not the full benchmark{capped}", file=sys.stderr)
    return embedded_sample_dir(options.task), EMBEDDED_SAMPLE


def load_data(options: PromoterOptions, seed: int) -> PromoterData:
    """Read and check the data of ``options`` (a bundled task or own files) before anything is written."""
    if options.task == ECOLI_TASK:
        data_root = resolve_data_root(options.data_root)
        data = load_ecoli(data_root / "promoters" / ECOLI_TASK, options.max_rows, seed)
        root = str(data_root)
        protocol = (f"{options.cv or CV_FOLDS}-fold stratified CV (sequences upper-cased, headers ignored, duplicates removed); "
                    "each fold early-stops on 10% of its training part")
        splits, class_names = {"all": data}, list(BINARY_CLASSES)
    elif options.task is not None:
        task_dir, root = gue_task_dir(options)
        splits, class_names = load_gue(task_dir, options.max_rows, seed)
        protocol = "train on train.csv, early stopping on dev.csv MCC"
    else:
        files = {name: Path(path) for name, path in (("train", options.train), ("dev", options.dev), ("test", options.test))
                 if path is not None}
        splits, class_names = load_labelled_files(files, options.max_rows, seed, options.positive_class)
        max_len = resolve_max_length(splits, options.max_length)
        protocol = f"train on {files['train'].name}, early stopping on "
        if "dev" in splits:
            protocol += f"{files['dev'].name} MCC"
        else:
            train, dev = dev_split(splits.pop("train"), seed, files["train"], class_names)
            splits = {"train": train, "dev": dev, **splits}
            protocol += f"the MCC of a seeded stratified 10% of {files['train'].name} (identical sequences kept on one side)"
        return PromoterData(splits, class_names, max_len, protocol)
    return PromoterData(splits, class_names, resolve_max_length(splits, options.max_length), protocol, root)
