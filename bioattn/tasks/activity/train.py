"""The activity task: train :class:`~bioattn.models.activity.ActivityRegressor` beside same-run baselines.

Protocols (:func:`run_activity`), chosen from the options:

- ``dev`` file: holdout; one model per seed (``seeds``), scored on the dev file.
- ``folds_from_files`` (or the bundled ``dataset="lentimpra_wtc11"``, whose two files are the folds): one fold per
  training file; each fold model trains on the other files and is scored on its own file (2 files: fold1 → fold2
  and fold2 → fold1).
- otherwise (``cv=K``, default :data:`DEFAULT_CV`): K-fold cross-validation over every row, grouped by element
  (a sequence and its reverse complement always share a fold).
- ``fit_all``: one model on every row (for shipping, after a cross-validation chose the recipe); only the
  validation part is scored.

Every model early-stops on :data:`VALIDATION_FRACTION` of the elements of its training part (never on the rows
it is scored on), with a schedule scaled to the run (at least :data:`MIN_STEPS` optimizer steps, so ~40
sequences still train), and is compared on the same rows with the k-mer ridge and the mean predictor fitted on
its whole training part (:mod:`~bioattn.tasks.activity.scores`). Loss: Huber on standardised targets (the model
saves the training mean / sd and predicts in the file's units). Flanks shared by every training sequence are
detected (or given) and stripped; ``strand="both"`` trains on random reverse complements and averages both
strands at prediction; ``shift`` moves each training sequence by up to that many nt (N fill) as augmentation.

After training, each deep model is blended (``blend``, default ``"motifs"``: :func:`~bioattn.tasks.activity.
branches.blend_with_ridge`) with a ridge regression on known-motif scores fitted on its whole training part; the
blend is the saved model, and the deep model alone is scored beside it and the baselines.
"""
from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import TensorDataset

from bioattn.data.dna import N_ID, PAD_ID, reverse_complement_ids
from bioattn.data.root import resolve_data_root
from bioattn.errors import UserInputError
from bioattn.models.activity import STRANDS, ActivityRegressor
from bioattn.tasks.activity.data import (
    ActivitySplit,
    detect_flanks,
    element_groups,
    file_folds,
    group_folds,
    read_activity_file,
    read_activity_files,
    strip_all,
    validation_split,
)
from bioattn.tasks.activity.branches import (
    BLENDS,
    DEFAULT_BLEND,
    DEFAULT_DEEP_WEIGHT,
    DEFAULT_MOTIF_BINS,
    DEFAULT_MOTIF_DB,
    MIN_BLEND_VALIDATION,
    MotifSet,
    blend_features,
    blend_with_ridge,
    choose_deep_weight,
    fit_kmer_branch,
    load_motif_set,
    motif_feature_matrix,
)
from bioattn.tasks.activity.scores import DEEP_NAME, RIDGE_NAME, baseline_predictions, regression_metrics
from bioattn.tasks.common import TaskOptions, fit_timed
from bioattn.tasks.driver import Member, cv_members, seed_members
from bioattn.tasks.driver import run_members as drive_members
from bioattn.training import TrainConfig, Trainer, seed_everything

DATASETS = {"lentimpra_wtc11": ("activity/lentimpra_wtc11", ("fold1.tsv", "fold2.tsv"))}
DEFAULT_CV = 5
VALIDATION_FRACTION = 0.1
MIN_STEPS = 300
QUICK_ROWS = 400
HEADLINE = "pearson"


@dataclass(frozen=True, kw_only=True)
class ActivityOptions(TaskOptions):
    """Options of an activity run (the run options are :class:`~bioattn.tasks.common.TaskOptions`').

    Data: ``train`` (one or more CSV/TSV/FASTA files) or ``dataset`` (bundled, under ``data_root``), ``dev``,
    ``targets`` (value columns; default every numeric one), ``sequence_column``, ``flanks`` (``None``: detected;
    ``("", "")``: none), ``strand``, ``folds_from_files``, ``fit_all``, ``max_rows``. Model: ``channels``,
    ``kernel``, ``stages``, ``embed_dim``, ``heads``, ``layers``, ``dropout``. Training: ``epochs``,
    ``batch_size``, ``lr``, ``weight_decay``, ``patience``, ``shift``, ``seed``, ``device``. Blend: ``blend``
    (``motifs``, ``kmers`` or ``none``), ``deep_weight``, ``motif_db``, ``motif_bins``.
    """

    train: tuple[Path, ...] = ()
    dataset: str | None = None
    dev: Path | None = None
    targets: tuple[str, ...] = ()
    sequence_column: str | None = None
    flanks: tuple[str, str] | None = None
    strand: str = "forward"
    folds_from_files: bool = False
    fit_all: bool = False
    max_rows: int | None = None
    channels: int = 128
    kernel: int = 7
    stages: int = 3
    embed_dim: int = 128
    heads: int = 4
    layers: int = 2
    dropout: float | None = 0.2
    epochs: int = 40
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.01
    patience: int | None = 8
    shift: int = 3
    seed: int = 0
    device: str = "auto"
    baselines: bool = True
    kmer_branch: int = 0
    blend: str = DEFAULT_BLEND
    deep_weight: float | None = DEFAULT_DEEP_WEIGHT
    motif_db: str = DEFAULT_MOTIF_DB
    motif_bins: int = DEFAULT_MOTIF_BINS

    def __post_init__(self) -> None:
        if bool(self.train) == bool(self.dataset):
            raise UserInputError("give your own --train file(s) or a bundled --dataset, one of them")
        if self.dataset is not None and self.dataset not in DATASETS:
            raise UserInputError(f"unknown --dataset {self.dataset!r}; bundled: {', '.join(DATASETS)}")
        if self.strand not in STRANDS:
            raise UserInputError(f"--strand must be one of {', '.join(STRANDS)}, got {self.strand!r}")
        if sum([self.dev is not None, self.folds_from_files, self.cv is not None, self.fit_all]) > 1:
            raise UserInputError("choose one protocol: --dev FILE, --folds-from-files, --cv K or --fit-all")
        if self.folds_from_files and len(self.train) == 1:
            raise UserInputError("--folds-from-files needs two or more --train files (one fold each)")
        for name in ("epochs", "batch_size", "channels", "embed_dim", "heads", "layers"):
            if getattr(self, name) < 1:
                raise UserInputError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if self.embed_dim % self.heads:
            raise UserInputError(f"--embed-dim ({self.embed_dim}) must be divisible by --heads ({self.heads})")
        if self.shift < 0 or not 0 <= (self.dropout or 0.0) < 1:
            raise UserInputError("--shift must be >= 0 and --dropout in [0, 1)")
        if self.blend not in BLENDS:
            raise UserInputError(f"--blend must be one of {', '.join(BLENDS)}, got {self.blend!r}")
        if (self.deep_weight is not None and not 0 <= self.deep_weight <= 1) or self.motif_bins < 1:
            raise UserInputError("--deep-weight must be auto or in [0, 1], and --motif-bins >= 1")
        if self.seeds is not None and self.dev is None:
            raise UserInputError("--seeds trains one model per seed on a holdout split: give --dev FILE too")
        self.check_run_options()

    @property
    def protocol(self) -> str:
        if self.dev is not None:
            return "holdout"
        if self.fit_all:
            return "fit_all"
        if self.folds_from_files or (self.dataset is not None and self.cv is None):
            return "file_folds"
        return "cv"


def train_config(options: ActivityOptions, rows: int) -> TrainConfig:
    """The training schedule of ``options`` for ``rows`` training sequences: AdamW, warm-up + cosine, early stopping
    on validation Pearson, at least :data:`MIN_STEPS` steps (a small set trains more epochs)."""
    batch = max(2, min(options.batch_size, rows // 4 or 2))
    epochs = 2 if options.quick else options.epochs
    return TrainConfig(max_epochs=epochs, batch_size=batch, lr=options.lr, weight_decay=options.weight_decay,
                       schedule="warmup_cosine", warmup_steps=max(1, (rows // batch) * epochs // 10),
                       grad_clip=1.0, patience=options.patience, monitor="val_pearson", monitor_mode="max",
                       min_steps=0 if options.quick else MIN_STEPS, seed=options.seed, device=options.device,
                       max_steps_per_epoch=15 if options.quick else None)


# ------------------------------------------------------------------------------------------------ data
@dataclass
class ActivityData:
    """The rows of a run (flanks stripped), the flanks and how the run splits them."""

    pool: ActivitySplit
    dev: ActivitySplit | None
    flanks: tuple[str, str]
    input_length: int
    files: list[str]
    motif_set: MotifSet | None = None
    motif_scores: dict[str, np.ndarray] | None = None

    def motif_features(self, which: str = "pool", index: np.ndarray | None = None) -> np.ndarray | None:
        """The motif scores of the rows ``index`` (default all) of ``which`` (``pool`` or ``dev``), computed once
        per file; ``None`` without a motif set."""
        if self.motif_set is None:
            return None
        if self.motif_scores is None:
            self.motif_scores = {}
        if which not in self.motif_scores:
            source = self.dev if which == "dev" else self.pool
            self.motif_scores[which] = motif_feature_matrix(tokens_of(source, self.input_length), self.motif_set)
        return self.motif_scores[which] if index is None else self.motif_scores[which][index]


def load_data(options: ActivityOptions) -> ActivityData:
    """Read, check and strip the files of ``options`` (before anything is written)."""
    files = [Path(p) for p in options.train]
    if options.dataset is not None:
        folder, names = DATASETS[options.dataset]
        root = resolve_data_root(options.data_root)
        files = [root / folder / name for name in names]
        missing = [f for f in files if not f.is_file()]
        if missing:
            raise UserInputError(f"{missing[0]}: not found under the data root; see data_cards/lentimpra_wtc11.md")
    pool = read_activity_files(files, targets=options.targets or None, sequence_column=options.sequence_column)
    dev = None
    if options.dev is not None:
        dev = read_activity_file(options.dev, targets=pool.target_names, sequence_column=options.sequence_column)
    if options.max_rows is not None or options.quick:
        cap = options.max_rows or QUICK_ROWS
        keep = np.sort(np.random.default_rng(options.seed).permutation(len(pool))[:cap])
        pool = pool.subset(keep)
        dev = dev.subset(np.arange(min(len(dev), cap))) if dev is not None else None
    flanks = tuple(options.flanks) if options.flanks is not None else detect_flanks(pool.sequences)
    if any(flanks):
        print(f"flanks: 5' {flanks[0] or '-'} / 3' {flanks[1] or '-'} stripped before the model "
              f"({'given' if options.flanks is not None else 'shared by every training sequence'})", file=sys.stderr)
    pool = strip_all(pool, flanks)  # type: ignore[arg-type]
    dev = strip_all(dev, flanks) if dev is not None else None  # type: ignore[arg-type]
    input_length = int(pool.lengths().max())
    if dev is not None and dev.lengths().max() > input_length:
        i = int(dev.lengths().argmax())
        raise UserInputError(f"{options.dev}: record {dev.records[i]!r}: {dev.lengths()[i]} nt, longer than every "
                             f"training sequence ({input_length} nt)")
    motif_set = None
    if options.blend == "motifs" or (options.baselines and not options.quick):
        motif_set = load_motif_set(options.motif_db, options.motif_bins)
    return ActivityData(pool, dev, flanks, input_length, [str(f) for f in files],  # type: ignore[arg-type]
                        motif_set=motif_set)


def tokens_of(split: ActivitySplit, length: int) -> Tensor:
    """``(N, length)`` token ids, right-padded."""
    from bioattn.data.dna import encode

    out = torch.full((len(split), length), PAD_ID, dtype=torch.long)
    for i, sequence in enumerate(split.sequences):
        out[i, : len(sequence)] = torch.from_numpy(encode(sequence))
    return out


def shift_tokens(ids: Tensor, max_shift: int) -> Tensor:
    """Each row moved by a random ``-max_shift..max_shift`` nt within its length (vacated positions ``N``)."""
    if max_shift == 0:
        return ids
    shifts = torch.randint(-max_shift, max_shift + 1, (ids.shape[0],), device=ids.device)
    positions = torch.arange(ids.shape[1], device=ids.device)[None, :] - shifts[:, None]
    lengths = (ids != PAD_ID).sum(1, keepdim=True)
    inside = (positions >= 0) & (positions < lengths)
    moved = ids.gather(1, positions.clamp(0, ids.shape[1] - 1))
    return torch.where(ids == PAD_ID, ids, torch.where(inside, moved, torch.full_like(ids, N_ID)))


# ------------------------------------------------------------------------------------------------ one model
def build_model(options: ActivityOptions, data: ActivityData, train: ActivitySplit) -> ActivityRegressor:
    sd = train.values.std(axis=0)
    return ActivityRegressor(
        input_length=data.input_length, target_names=train.target_names, target_mean=train.values.mean(axis=0).tolist(),
        target_sd=np.where(sd > 0, sd, 1.0).tolist(), flanks=data.flanks, strand=options.strand,
        channels=32 if options.quick else options.channels, kernel=options.kernel, stages=options.stages,
        embed_dim=32 if options.quick else options.embed_dim, num_heads=2 if options.quick else options.heads,
        num_layers=1 if options.quick else options.layers, dropout=options.dropout or 0.0,
        kmer_branch=options.kmer_branch)


def fit_model(options: ActivityOptions, data: ActivityData, train: ActivitySplit, run_dir: Path, seed: int,
              motif_features: np.ndarray | None = None) -> tuple[ActivityRegressor, dict[str, Any], ActivityRegressor]:
    """Train one model on ``train`` (early stopping on :data:`VALIDATION_FRACTION` of its elements), blend it as
    ``options.blend`` says with a ridge fitted on all of ``train`` (``motif_features``: its rows' motif scores, when
    already computed) and save the result into ``run_dir``; returns ``(saved model, training summary, deep model
    alone)`` (both in eval mode; the same object without a blend)."""
    fit_index, val_index = validation_split(train, VALIDATION_FRACTION, seed)
    fit, val = train.subset(fit_index), train.subset(val_index)
    config = dataclasses.replace(train_config(options, len(fit)), seed=seed)
    seed_everything(seed)
    model = build_model(options, data, fit)
    fit_tokens, val_tokens = tokens_of(fit, data.input_length), tokens_of(val, data.input_length)
    scaled = torch.tensor((fit.values - fit.values.mean(0)) / model.target_sd.numpy(), dtype=torch.float32)
    kmer_alpha = fit_kmer_branch(model, fit_tokens, scaled) if options.kmer_branch else None

    def loss_fn(module: nn.Module, batch: tuple[Tensor, Tensor]) -> Tensor:
        ids, targets = batch
        ids = shift_tokens(ids, options.shift)
        if options.strand == "both":
            flip = torch.rand(ids.shape[0], device=ids.device) < 0.5
            ids = torch.where(flip[:, None], reverse_complement_ids(ids, ids == PAD_ID), ids)
        out, _ = module.standardised(ids)  # type: ignore[operator]
        return F.huber_loss(out, targets, delta=1.0)

    def evaluate(module: nn.Module) -> dict[str, float]:
        predicted = module.predict_tokens(val_tokens, batch_size=512)  # type: ignore[operator]
        return {f"val_{k}": v for k, v in regression_metrics(val.values, predicted, val.target_names).items()}

    trainer = Trainer(model, TensorDataset(fit_tokens, scaled), config, run_dir, loss_fn=loss_fn, evaluate=evaluate,
                      run_info={"protocol": options.protocol, "rows": len(fit)})
    result, info = fit_timed(trainer)
    model.eval()
    info.update(sizes={"fit": len(fit), "validation": len(val)}, validation=evaluate(model), kmer_alpha=kmer_alpha,
                learned=bool(info.get("best_epoch")), config=config.to_dict(), blend=options.blend)
    final, blend_info = blend_member(options, data, model, train, seed, motif_features)
    info.update(blend_info)
    final.save_pretrained(run_dir)
    return final, info, model


def blend_member(options: ActivityOptions, data: ActivityData, deep: ActivityRegressor, train: ActivitySplit,
                 seed: int, motif_features: np.ndarray | None = None) -> tuple[ActivityRegressor, dict[str, Any]]:
    """``(saved model, {"deep_weight", "deep_weight_validation"})``: the trained ``deep`` model blended as
    ``options.blend`` says with a ridge on all of ``train``, the weight chosen (``options.deep_weight`` None) on the
    same validation rows :func:`fit_model` early-stopped on (``seed``); ``deep`` itself for ``blend="none"``."""
    if options.blend == "none":
        return deep, {}
    info: dict[str, Any] = {}
    train_tokens = tokens_of(train, data.input_length)
    features = blend_features(train_tokens, options.blend, data.motif_set, motif_features)
    weight = options.deep_weight
    if weight is None:
        fit_index, val_index = validation_split(train, VALIDATION_FRACTION, seed)
        if len(val_index) < MIN_BLEND_VALIDATION:
            info.update(deep_weight=1.0, blend_note=f"deep model kept alone: {len(val_index)} validation rows are too "
                                                    f"few to choose a blend (at least {MIN_BLEND_VALIDATION})")
            return deep, info
        weight, info["deep_weight_validation"] = choose_deep_weight(
            deep, (features[fit_index], train.values[fit_index]),
            (train_tokens[val_index], features[val_index], train.values[val_index]))
    if weight == 1.0:
        info["deep_weight"] = 1.0
        return deep, info
    final = blend_with_ridge(deep, train_tokens, train.values, blend=options.blend, deep_weight=weight,
                             motif_set=data.motif_set, motif_features=features if options.blend == "motifs" else None)
    info["deep_weight"] = weight
    return final, info


def score_member(model: ActivityRegressor, data: ActivityData, train: ActivitySplit, held_out: ActivitySplit,
                 baselines: bool = True, *, deep: ActivityRegressor | None = None,
                 motif_features: tuple[np.ndarray, np.ndarray] | None = None,
                 ) -> tuple[dict[str, dict[str, float]], dict[str, np.ndarray]]:
    """``({"model" | baseline name: metrics on held_out}, {name: predictions})`` with the baselines fitted on
    ``train`` (unless ``baselines`` is False); ``deep``: the model's deep part alone, scored beside it when it is
    a blend (the same numbers when the run kept it alone); ``motif_features``: (train, held_out) motif scores for the motif ridge baseline."""
    tokens = tokens_of(held_out, data.input_length)
    predictions = {"model": model.predict_tokens(tokens, batch_size=512)}
    if deep is not None:
        predictions[DEEP_NAME] = (predictions["model"] if deep is model else
                                  deep.predict_tokens(tokens, batch_size=512))
    if baselines:
        predictions.update(baseline_predictions(train.sequences, train.values, held_out.sequences,
                                                motif_features=motif_features))
    return ({name: regression_metrics(held_out.values, values, held_out.target_names)
             for name, values in predictions.items()}, predictions)


# ------------------------------------------------------------------------------------------------ protocols
def members_of(options: ActivityOptions, data: ActivityData, run_dir: Path) -> list[Member]:
    if options.protocol == "holdout":
        return seed_members(run_dir, options.seeds, options.seed)
    if options.protocol == "fit_all":
        return [Member("seed", options.seed, run_dir, 1, 1, alone=True)]
    if options.protocol == "file_folds":
        return cv_members(run_dir, file_folds(data.pool.file_index))
    return cv_members(run_dir, group_folds(element_groups(data.pool.sequences), options.cv or DEFAULT_CV,
                                           options.seed))


def run_members(options: ActivityOptions, data: ActivityData, run_dir: Path) -> dict[str, Any]:
    """Train and score every member of the run; returns the per-member results and the out-of-fold rows."""
    members = members_of(options, data, run_dir)
    out_of_fold: list[list[Any]] = []

    def train_member(member: Member) -> dict[str, Any]:
        if member.kind == "fold":
            train, held_out = data.pool.subset(member.train_index), data.pool.subset(member.held_out_index)
            features = (data.motif_features("pool", member.train_index),
                        data.motif_features("pool", member.held_out_index))
        else:
            train, held_out = data.pool, data.dev
            features = (data.motif_features("pool"), data.motif_features("dev") if held_out is not None else None)
        seed = member.index if member.kind == "seed" else options.seed
        model, info, deep = fit_model(options, data, train, member.run_dir, seed, motif_features=features[0])
        result: dict[str, Any] = {"member": member.dir_name if not member.alone else ".", "training": info,
                                  "sizes": {"train": len(train), "held_out": len(held_out) if held_out else 0}}
        if held_out is not None:
            scores, predictions = score_member(
                model, data, train, held_out, options.baselines, deep=deep if options.blend != "none" else None,
                motif_features=features if features[0] is not None else None)  # type: ignore[arg-type]
            result["scores"] = scores
            if member.kind == "fold":
                for i, record in enumerate(held_out.records):
                    for t, target in enumerate(held_out.target_names):
                        ridge = predictions.get(RIDGE_NAME)
                        out_of_fold.append([record, member.index, target, held_out.values[i, t],
                                            predictions["model"][i, t], ridge[i, t] if ridge is not None else ""])
        return result

    return {"members": drive_members(run_dir, members, train_member).results, "out_of_fold": out_of_fold,
            "member_dirs": [m.dir_name for m in members if not m.alone]}
