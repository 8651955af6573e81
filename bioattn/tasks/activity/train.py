"""The activity task: train :class:`~bioattn.models.activity.ActivityRegressor` beside same-run baselines.

Protocols, chosen from the options: holdout on a ``dev`` file (one model per seed), one fold per training file
(``folds_from_files`` or a bundled ``dataset``), K-fold cross-validation grouped by element (default
:data:`DEFAULT_CV`) or ``fit_all``. Each deep model early-stops on :data:`VALIDATION_FRACTION` of its training
elements and is then blended with ridges (:func:`~bioattn.tasks.activity.branches.blend_parts`).
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

from bioattn.data.dna import N_ID, PAD_ID, encode, reverse_complement_ids
from bioattn.data.root import resolve_data_root
from bioattn.errors import UserInputError
from bioattn.models.activity import STRANDS, ActivityRegressor
from bioattn.tasks.activity.data import (
    ActivitySplit, detect_flanks, parse_set, read_activity_file, read_activity_sets, strip_all, validation_split,
)
from bioattn.tasks.activity.branches import (
    BLEND_PARTS, BLENDS, DEFAULT_BLEND, DEFAULT_DEEP_WEIGHT, DEFAULT_MOTIF_BINS, DEFAULT_MOTIF_DB, MIN_BLEND_VALIDATION,
    MotifSet, blend_features, blend_parts, choose_weights, fit_kmer_branch, load_motif_set, motif_feature_matrix,
)
from bioattn.tasks.activity.scores import (
    BLEND_NAME, DEEP_NAME, MOTIF_RIDGE_NAME, RIDGE_NAME, baseline_predictions, regression_metrics,
)
from bioattn.tasks.common import TaskOptions, fit_timed
from bioattn.training import TrainConfig, Trainer, seed_everything

#: Bundled datasets (under the data root): their files as ``--train`` values and their data cards.
DATASETS = {
    "lentimpra_wtc11": (("activity/lentimpra_wtc11/fold1.tsv", "activity/lentimpra_wtc11/fold2.tsv"),
                        "lentimpra_wtc11"),
    "lentimpra_hepg2": (("hepg2=activity/lentimpra_hepg2/fold_a.tsv", "hepg2=activity/lentimpra_hepg2/fold_b.tsv"),
                        "lentimpra_hepg2"),
    "lentimpra_hepg2_wtc11": (("hepg2=activity/lentimpra_hepg2/fold_a.tsv", "wtc11=activity/lentimpra_wtc11/fold1.tsv",
                               "hepg2=activity/lentimpra_hepg2/fold_b.tsv", "wtc11=activity/lentimpra_wtc11/fold2.tsv"),
                              "lentimpra_hepg2"),
}
DEFAULT_CV = 5
VALIDATION_FRACTION = 0.1
MIN_STEPS = 300
QUICK_ROWS = 400
HEADLINE = "pearson"
#: ``(rows below, (channels, embed_dim, heads, layers, batch_size))``; flags given by the user win.
SIZE_SCHEDULE = ((1_000, (32, 32, 2, 1, 32)), (5_000, (64, 64, 4, 2, 64)), (None, (128, 128, 4, 2, 64)))
SIZED = ("channels", "embed_dim", "heads", "layers", "batch_size")
CANDIDATE_NAMES = {"blend": BLEND_NAME, "deep": DEEP_NAME, "kmers": RIDGE_NAME, "motifs": MOTIF_RIDGE_NAME}


@dataclass(frozen=True, kw_only=True)
class ActivityOptions(TaskOptions):
    """Options of an activity run; sizes left ``None`` follow :data:`SIZE_SCHEDULE`, ``flanks=None``: detected."""

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
    channels: int | None = None
    kernel: int = 7
    stages: int = 3
    embed_dim: int | None = None
    heads: int | None = None
    layers: int | None = None
    dropout: float | None = 0.2
    epochs: int = 40
    batch_size: int | None = None
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
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise UserInputError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if self.embed_dim is not None and self.heads is not None and self.embed_dim % self.heads:
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

    def sized(self, rows: int) -> "ActivityOptions":
        """These options with every ``None`` size set from :data:`SIZE_SCHEDULE` for ``rows`` sequences."""
        chosen = next(sizes for below, sizes in SIZE_SCHEDULE if below is None or rows < below)
        if self.quick:
            chosen = (32, 32, 2, 1, chosen[4])
        values = {name: value for name, value in zip(SIZED, chosen) if getattr(self, name) is None}
        if "heads" in values and (self.embed_dim or chosen[1]) % values["heads"]:
            values["heads"] = 1
        if "embed_dim" in values and self.heads is not None and values["embed_dim"] % self.heads:
            values["embed_dim"] = self.heads * max(1, values["embed_dim"] // self.heads)
        return dataclasses.replace(self, **values) if values else self


def train_config(options: ActivityOptions, rows: int) -> TrainConfig:
    """AdamW, warm-up + cosine, early stopping on validation Pearson, at least :data:`MIN_STEPS` steps."""
    batch = max(2, min(options.batch_size or 64, rows // 4 or 2))
    epochs = 2 if options.quick else options.epochs
    return TrainConfig(max_epochs=epochs, batch_size=batch, lr=options.lr, weight_decay=options.weight_decay,
                       schedule="warmup_cosine", warmup_steps=max(1, (rows // batch) * epochs // 10),
                       grad_clip=1.0, patience=options.patience, monitor="val_pearson", monitor_mode="max",
                       min_steps=0 if options.quick else MIN_STEPS, seed=options.seed, device=options.device,
                       max_steps_per_epoch=15 if options.quick else None)


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
        """The motif scores of rows ``index`` of ``which`` (``pool`` / ``dev``); ``None`` without a motif set."""
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
    specs = [str(p) for p in options.train]
    if options.dataset is not None:
        relative, card = DATASETS[options.dataset]
        root = resolve_data_root(options.data_root)
        specs = [f"{name}={root / path}" if name else str(root / path)
                 for name, path in (parse_set(spec) for spec in relative)]
        missing = [path for _, path in map(parse_set, specs) if not path.is_file()]
        if missing:
            raise UserInputError(f"{missing[0]}: not found under the data root; see data_cards/{card}.md")
    pool = read_activity_sets(specs, targets=options.targets or None, sequence_column=options.sequence_column)
    files = [path for _, path in map(parse_set, specs)]
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
    if "motifs" in BLEND_PARTS[options.blend] or (options.baselines and not options.quick):
        motif_set = load_motif_set(options.motif_db, options.motif_bins)
    return ActivityData(pool, dev, flanks, input_length, [str(f) for f in files],  # type: ignore[arg-type]
                        motif_set=motif_set)


def tokens_of(split: ActivitySplit, length: int) -> Tensor:
    """``(N, length)`` token ids, right-padded."""
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


def build_model(options: ActivityOptions, data: ActivityData, train: ActivitySplit) -> ActivityRegressor:
    options = options.sized(len(data.pool))
    sd = np.nan_to_num(np.nanstd(train.values, axis=0))
    return ActivityRegressor(input_length=data.input_length, target_names=train.target_names,
                             target_mean=np.nan_to_num(np.nanmean(train.values, axis=0)).tolist(),
                             target_sd=np.where(sd > 0, sd, 1.0).tolist(), flanks=data.flanks, strand=options.strand,
                             channels=options.channels, kernel=options.kernel, stages=options.stages,
                             embed_dim=options.embed_dim, num_heads=options.heads, num_layers=options.layers,
                             dropout=options.dropout or 0.0, kmer_branch=options.kmer_branch, clip_features=True)


@dataclass
class Candidates:
    """One member's models: ``deep``, ``blend`` (:func:`blend_member`), ``parts`` (each ridge alone) and ``info``."""

    deep: ActivityRegressor
    blend: ActivityRegressor
    parts: dict[str, ActivityRegressor]
    info: dict[str, Any]

    def model(self, name: str) -> ActivityRegressor:
        return {"blend": self.blend, "deep": self.deep, **self.parts}[name]


def fit_model(options: ActivityOptions, data: ActivityData, train: ActivitySplit, run_dir: Path, seed: int,
              motif_features: np.ndarray | None = None) -> tuple[ActivityRegressor, dict[str, Any], ActivityRegressor]:
    """Train, blend and save one model: ``(saved model, training summary, deep model alone)``."""
    fitted = fit_candidates(options, data, train, run_dir, seed, motif_features)
    return fitted.blend, fitted.info, fitted.deep


def fit_candidates(options: ActivityOptions, data: ActivityData, train: ActivitySplit, run_dir: Path, seed: int,
                   motif_features: np.ndarray | None = None, plan: Any = None) -> Candidates:
    """:func:`fit_model`, keeping every candidate (:class:`Candidates`); ``plan`` is told of each epoch."""
    options = options.sized(len(data.pool))
    fit_index, val_index = validation_split(train, VALIDATION_FRACTION, seed)
    fit, val = train.subset(fit_index), train.subset(val_index)
    config = dataclasses.replace(train_config(options, len(fit)), seed=seed)
    seed_everything(seed)
    model = build_model(options, data, fit)
    fit_tokens, val_tokens = tokens_of(fit, data.input_length), tokens_of(val, data.input_length)
    scaled = torch.tensor((fit.values - model.target_mean.numpy()) / model.target_sd.numpy(), dtype=torch.float32)
    kmer_alpha = fit_kmer_branch(model, fit_tokens, scaled) if options.kmer_branch else None

    def loss_fn(module: nn.Module, batch: tuple[Tensor, Tensor]) -> Tensor:
        ids, targets = batch
        ids = shift_tokens(ids, options.shift)
        if options.strand == "both":
            flip = torch.rand(ids.shape[0], device=ids.device) < 0.5
            ids = torch.where(flip[:, None], reverse_complement_ids(ids, ids == PAD_ID), ids)
        out, _ = module.standardised(ids)  # type: ignore[operator]
        measured = torch.isfinite(targets)
        if measured.all():
            return F.huber_loss(out, targets, delta=1.0)
        return F.huber_loss(out[measured], targets[measured], delta=1.0)

    def evaluate(module: nn.Module) -> dict[str, float]:
        predicted = module.predict_tokens(val_tokens, batch_size=512)  # type: ignore[operator]
        if plan is not None:
            plan.epoch_done()
        return {f"val_{k}": v for k, v in regression_metrics(val.values, predicted, val.target_names).items()}

    trainer = Trainer(model, TensorDataset(fit_tokens, scaled), config, run_dir, loss_fn=loss_fn, evaluate=evaluate,
                      run_info={"protocol": options.protocol, "rows": len(fit)})
    if plan is not None:
        plan.start(trainer.config.max_epochs)
    result, info = fit_timed(trainer)
    if plan is not None:
        plan.stop()
    model.eval()
    info.update(sizes={"fit": len(fit), "validation": len(val)}, validation=evaluate(model), kmer_alpha=kmer_alpha,
                learned=bool(info.get("best_epoch")), config=config.to_dict(), blend=options.blend)
    final, blend_info, parts = blend_member(options, data, model, train, seed, motif_features, with_parts=True)
    info.update(blend_info)
    final.save_pretrained(run_dir)
    return Candidates(model, final, parts, info)


def blend_member(options: ActivityOptions, data: ActivityData, deep: ActivityRegressor, train: ActivitySplit,
                 seed: int, motif_features: np.ndarray | None = None, *, with_parts: bool = False) -> Any:
    """``(saved model, blend info)`` (``with_parts``: plus ``{part: that ridge alone}``) of ``deep`` and ``train``."""
    part_names = BLEND_PARTS[options.blend]
    info: dict[str, Any] = {}
    if not part_names:
        return (deep, info, {}) if with_parts else (deep, info)
    train_tokens = tokens_of(train, data.input_length)
    features = {name: blend_features(train_tokens, name, data.motif_set, motif_features) for name in part_names}
    motif_scores = features.get("motifs")

    def blended(weights: dict[str, float]) -> ActivityRegressor:
        return blend_parts(deep, train_tokens, train.values, weights, motif_set=data.motif_set,
                           motif_features=motif_scores)

    parts = {name: blended({name: 1.0}) for name in part_names} if with_parts else {}
    if options.deep_weight is not None:
        rest = (1 - options.deep_weight) / len(part_names)
        weights = {"deep": options.deep_weight, **{name: rest for name in part_names}}
    else:
        fit_index, val_index = validation_split(train, VALIDATION_FRACTION, seed)
        if len(val_index) < MIN_BLEND_VALIDATION:
            info.update(deep_weight=1.0, blend_note=f"deep model kept alone: {len(val_index)} validation rows are too "
                                                    f"few to choose a blend (at least {MIN_BLEND_VALIDATION})")
            return (deep, info, parts) if with_parts else (deep, info)
        weights, info["deep_weight_validation"] = choose_weights(
            deep, {name: (features[name][fit_index], train.values[fit_index], features[name][val_index])
                   for name in part_names}, (train_tokens[val_index], train.values[val_index]))
    info.update(deep_weight=weights["deep"], blend_weights=weights)
    if weights["deep"] == 1.0:
        return (deep, info, parts) if with_parts else (deep, info)
    final = blended(weights)
    return (final, info, parts) if with_parts else (final, info)


def score_member(model: ActivityRegressor, data: ActivityData, train: ActivitySplit, held_out: ActivitySplit,
                 baselines: bool = True, *, deep: ActivityRegressor | None = None,
                 motif_features: tuple[np.ndarray, np.ndarray] | None = None,
                 parts: dict[str, ActivityRegressor] | None = None,
                 ) -> tuple[dict[str, dict[str, float]], dict[str, np.ndarray]]:
    """``({"model" | baseline name: metrics on held_out}, {name: predictions})``, baselines fitted on ``train``."""
    tokens = tokens_of(held_out, data.input_length)
    predictions = {"model": model.predict_tokens(tokens, batch_size=512)}
    if deep is not None:
        predictions[DEEP_NAME] = (predictions["model"] if deep is model else
                                  deep.predict_tokens(tokens, batch_size=512))
    for name, part in (parts or {}).items():
        predictions[CANDIDATE_NAMES[name]] = part.predict_tokens(tokens, batch_size=512)
    if baselines:
        for name, values in baseline_predictions(
                train.sequences, train.values, held_out.sequences, motif_features=motif_features,
                skip=tuple(CANDIDATE_NAMES[p] for p in parts or {})).items():
            predictions.setdefault(name, values)
    return ({name: regression_metrics(held_out.values, values, held_out.target_names)
             for name, values in predictions.items()}, predictions)
