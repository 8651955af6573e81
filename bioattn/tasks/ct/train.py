"""3D volume classification: the hybrid CNN + attention model beside a MONAI 3D ResNet, on MedMNIST 3D or your own
NIfTI/DICOM volumes listed in a labels CSV.

:func:`train_ct` (``bioattn train ct``) trains both models in one run, on the same split, with the same protocol,
budget and augmentation, and writes into the run directory:

- ``config.json`` + ``model.safetensors`` (the attention model, for ``bioattn predict ct`` / ``explain ct``; the
  class names are saved with it) and ``preprocessing.json`` (the NIfTI/DICOM preprocessing, flip test-time
  averaging, and a profile of the training volumes, see :mod:`bioattn.tasks.ct.preprocessing`);
- ``metrics.json`` (every number with the protocol that produced it; keys ``val_auroc``, ``val_accuracy``,
  ``val_mcc``, ``val_f1``, ``val_loss``, ``val_auroc_no_tta``, ``val_auroc_last_epoch``, ``test_*`` when there is a
  test split), ``val_auc.png`` (validation AUROC per epoch of both models), ``training_curve.png``,
  ``train_log.csv``, ``checkpoint/`` (``resume`` continues), ``splits.csv`` (manifest runs: the split of every
  volume), and the same for the baseline in ``baseline_resnet/``.

Protocols (:data:`PROTOCOLS`): ``tuned`` (the default) trains 15 epochs with AdamW (weight decay 0.05), warm-up +
cosine decay, label smoothing 0.1, no intensity jitter, and averages each prediction over the 8 flips of the
volume; ``medmnist`` is MedMNIST v2's official one (Adam, lr 1e-3, batch 32, no weight decay, lr x0.1 at 50 % and
75 % of the epochs). Both keep the best validation AUROC and score the test split when there is one. The attention
model trains without dropout, in fp32 (``--precision bf16`` is faster on a CPU with bf16 units, but its 3D
convolution weight gradients are sometimes wrong there); the ResNet baseline always in fp32 (bf16 overflows its
gradients).

Ensembles: ``seeds`` trains one complete run per seed (``seed<S>/``) on the same split; ``cv=K`` a stratified K-fold
cross-validation over train + val (``fold<k>/``, each fold's final weights, nothing selected on its held-out
fold; ``cv_repeats=R`` repeats it with R shuffles, R × K fold models, each volume's out-of-fold probability the mean
over repeats), reported as the out-of-fold AUROC of the pooled predictions of both models (and, on binary masks, of a
logistic regression on one number, the mean depth inside the mask, fitted on each fold's training part). Either
way the run directory loads as the :class:`~bioattn.models.ensemble.Ensemble` of the attention models. Runs under
``torchrun`` (only rank 0 evaluates and writes).

Binary masks (the training volumes hold two values, e.g. AdrenalMNIST3D): the attention model and the baseline
also get each voxel's depth inside the mask as a second input channel (``distance_channel``, see
:class:`HybridCT3D` and :class:`DistanceChannelInput`).
"""
from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from torch import nn
from torch.utils.data import ConcatDataset, Dataset, Subset

from bioattn.data import resolve_data_root
from bioattn.data.ct import VolumePreprocessing, apply_random_transform, foreground_distance, train_augmentation
from bioattn.errors import UserInputError
from bioattn.io import save_tensors, write_json, write_text
from bioattn.metrics import classification_metrics, decision_threshold, mean_std, order_binary_classes, with_prefix
from bioattn.models.ensemble import Ensemble
from bioattn.models.ct_resnet import ResNetCT3D
from bioattn.models.hybrid_ct import POOLS, HybridCT3D, predict_probabilities
from bioattn.progress import progress_bar
from bioattn.report import format_mean_sd, format_table
from bioattn.tasks.common import (
    Member,
    OutOfFold,
    Recipe,
    TaskOptions,
    count_parameters,
    cv_members,
    fit_timed,
    recipe_for,
    repeated_folds,
    save_members,
    seed_members,
    train_members,
    write_out_of_fold,
)
from bioattn.tasks.ct.data import (
    CTData,
    WithoutMetadata,
    hounsfield_window,
    load_manifest,
    load_medmnist,
    write_split_table,
)
from bioattn.tasks.ct.preprocessing import FITS, SavedPreprocessing
from bioattn.tasks.trust import baseline_warning, format_trust, trust_report
from bioattn.training import TrainConfig, Trainer, check_run_dir, plot_curves, prepare_run_dir, seed_everything
from bioattn.plots import plot_metric_per_epoch
from bioattn.distributed import is_main_process
from bioattn.training.mixup import check_mixup_alpha, mixup_cross_entropy

__all__ = [
    "MEDMNIST_DEFAULTS",
    "TUNED_DEFAULTS",
    "PROTOCOLS",
    "PUBLISHED",
    "DEFAULT_DATASET",
    "DEFAULT_MANIFEST_SIZE",
    "DEFAULT_STEM_DEPTH",
    "Protocol",
    "CTOptions",
    "resolve_protocol",
    "protocol_train_config",
    "build_models",
    "mean_mask_depth",
    "depth_baseline_probabilities",
    "train_one",
    "with_default_window",
    "not_learned_hints",
    "train_ct",
]

#: Small training sets (a few dozen volumes) under the tuned protocol: at least this many batches per epoch (the
#: batch shrinks) and this many optimizer steps (more epochs). AdrenalMNIST3D (1,188 training volumes: 38 batches of
#: 32, 570 steps) is above both, so its runs do not change.
SMALL_DATA_MIN_BATCHES = 4
SMALL_DATA_MIN_STEPS = 150
MEDMNIST_DEFAULTS = TrainConfig(
    max_epochs=100, batch_size=32, lr=1e-3, optimizer="adam", weight_decay=0.0, schedule="multistep",
    milestones=(50, 75), gamma=0.1, grad_clip=None, monitor="val_auroc", monitor_mode="max",
)
#: AdamW + weight decay, 40 steps of warm-up then cosine decay, gradient clipping, fp32 (bf16 is opt-in:
#: ``--precision bf16``).
TUNED_DEFAULTS = TrainConfig(
    max_epochs=15, batch_size=32, lr=1e-3, optimizer="adamw", weight_decay=0.05, schedule="warmup_cosine",
    warmup_steps=40, grad_clip=1.0, monitor="val_auroc", monitor_mode="max",
    min_steps=SMALL_DATA_MIN_STEPS, min_batches_per_epoch=SMALL_DATA_MIN_BATCHES,
)


@dataclass(frozen=True, kw_only=True)
class Protocol(Recipe):
    """A CT training protocol, the CT task's :class:`~bioattn.tasks.common.Recipe`: the optimisation defaults
    (``train_config``) plus the loss, augmentation and evaluation options."""

    label_smoothing: float
    intensity_jitter: float
    flip_tta: bool
    mixup: float


PROTOCOLS = {
    "medmnist": Protocol(
        MEDMNIST_DEFAULTS, label_smoothing=0.0, intensity_jitter=0.1, flip_tta=False, mixup=0.0,
        description="MedMNIST v2 official: Adam lr 1e-3, batch 32, lr x0.1 at 50%/75% of the epochs, "
                    "best val AUROC kept; flips, rotations and intensity jitter",
    ),
    "tuned": Protocol(
        TUNED_DEFAULTS, label_smoothing=0.1, intensity_jitter=0.0, flip_tta=True, mixup=0.0,
        description="AdamW (weight decay 0.05) lr 1e-3, batch 32, 40-step warm-up + cosine decay, gradient "
                    "clipping 1.0, label smoothing 0.1, flips and rotations (no intensity jitter: the volumes are "
                    "binary masks), 8-flip test-time averaging, best val AUROC kept",
    ),
}
DEFAULT_DATASET = "adrenalmnist3d"
DEFAULT_MANIFEST_SIZE = (64, 64, 64)
MEDMNIST_SIZES = (28, 64)
#: The MedMNIST edge trained on without --size: 64³, folded by 2 (see :meth:`CTOptions.unshuffle_factor`).
DEFAULT_MEDMNIST_SIZE = 64
#: Convolutions per CNN stage (HybridCT3D's stem_depth): 4, as deep as a ResNet-18 stage.
DEFAULT_STEM_DEPTH = 4
#: The classifier's input for manifest runs (see :attr:`CTOptions.pool_name`).
DEFAULT_MANIFEST_POOL = "cls+max"
#: Largest edge the CNN stem sees by default: bigger volumes are folded (unshuffled) down to it.
STEM_EDGE = 32
CLASS_NAMES = {"adrenalmnist3d": ("normal", "hyperplasia")}
# MedMNIST v2 (Yang et al., Sci. Data 2023), benchmark table, official test split: (AUROC, accuracy).
# See data_cards/adrenalmnist3d.md.
PUBLISHED = {
    "adrenalmnist3d": {
        "ResNet-18+2.5D": (0.718, 0.772), "ResNet-18+3D": (0.827, 0.721), "ResNet-18+ACS": (0.839, 0.754),
        "ResNet-50+3D": (0.828, 0.745), "ResNet-50+ACS": (0.828, 0.758),
        "auto-sklearn": (0.828, 0.802), "AutoKeras": (0.804, 0.705),
    },
}
HYBRID_NAME = "hybrid CNN+attention (bioattn)"
BASELINE_NAME = "MONAI ResNet-18 layout, 1/8 width"
DEPTH_BASELINE_NAME = "mean depth inside the mask (1 number, logistic regression)"
# column prefixes of out_of_fold.csv
OOF_PREFIXES = {HYBRID_NAME: "", BASELINE_NAME: "baseline_", DEPTH_BASELINE_NAME: "depth_"}
BASELINE_DIR = "baseline_resnet"
VAL_CURVE_NAME = "val_auc.png"
HISTORY_KEYS = ("epoch", "val_auroc", "val_accuracy", "val_auroc_no_tta")


@dataclass(frozen=True)
class CTOptions(TaskOptions):
    """Everything :func:`train_ct` needs. Give either ``dataset`` (a MedMNIST 3D name, found under ``data_root``;
    the default when there is no ``manifest``) or ``manifest`` (a labels CSV, see :mod:`bioattn.data.ct_manifest`).

    size: the MedMNIST edge ``(28,)`` or ``(64,)`` (default 64), or for a manifest the model input ``(X, Y, Z)`` (one
    value: a cube; default 64³; divisible by the CNN stride) that every volume is resized to (``fit="resize"``) or
    centre cropped / zero padded to (``fit="crop-pad"``). orientation (manifest default ``"RAS"``), spacing (mm)
    and window (``(low, high)`` onto [0, 1]; ``None``: :func:`train_ct` uses the soft-tissue window when the volumes
    are CT in Hounsfield units, see :func:`with_default_window`) are the other manifest preprocessing steps. label_smoothing,
    intensity_jitter, tta (``"none"``/``"flips"``) and mixup (the Beta concentration α, 0: off; see
    :mod:`bioattn.training.mixup`) default to the protocol's. unshuffle: see :meth:`unshuffle_factor` (``None``:
    the default). distance_channel: :class:`HybridCT3D`'s (``None``: on when the training volumes are binary
    masks). The run options (``out``, ``data_root``, ``quick``, ``seeds``, ``cv``, ``cv_repeats``, ``resume``,
    ``overwrite``) are :class:`~bioattn.tasks.common.TaskOptions`'. ``train_config``: the full training
    configuration (default: :func:`protocol_train_config`).
    """

    dataset: str | None = None
    manifest: Path | None = None
    size: tuple[int, ...] | None = None
    orientation: str | None = None
    spacing: tuple[float, float, float] | None = None
    window: tuple[float, float] | None = None
    fit: str = "resize"
    protocol: str = "tuned"
    baseline: str = "resnet"
    augment: bool = True
    label_smoothing: float | None = None
    intensity_jitter: float | None = None
    tta: str | None = None
    mixup: float | None = None
    stem_channels: tuple[int, ...] | None = None
    stem_strides: tuple[int, ...] | None = None
    stem_depth: int = DEFAULT_STEM_DEPTH
    unshuffle: int | None = None
    distance_channel: bool | None = None
    embed_dim: int = 96
    heads: int = 4
    layers: int = 3
    dropout: float = 0.0
    pool: str | None = None
    positive_class: str | None = None
    train_config: TrainConfig | None = None

    def __post_init__(self) -> None:
        self.check_run_options()
        if self.unshuffle is not None and self.unshuffle < 1:
            raise UserInputError(f"--unshuffle must be >= 1, got {self.unshuffle}")
        if self.stem_depth < 1:
            raise UserInputError(f"--stem-depth must be >= 1, got {self.stem_depth}")
        if self.dataset is not None and self.manifest is not None:
            raise UserInputError("give either a dataset (--dataset) or your own volumes (--manifest), not both")
        if self.protocol not in PROTOCOLS:
            raise UserInputError(f"unknown protocol {self.protocol!r}; choose from {', '.join(PROTOCOLS)}")
        if self.fit not in FITS:
            raise UserInputError(f"fit must be one of {', '.join(FITS)}, got {self.fit!r}")
        if self.manifest is None:
            given = [flag for flag, value in (("--orientation", self.orientation), ("--spacing", self.spacing),
                                              ("--intensity-window", self.window)) if value is not None]
            if self.fit != "resize":
                given.append("--fit")
            if self.positive_class is not None:
                given.append("--positive-class")
            if given:
                raise UserInputError(f"{', '.join(given)} apply to --manifest volumes, not to a MedMNIST dataset")
            if self.size is not None and (len(self.size) != 1 or self.size[0] not in MEDMNIST_SIZES):
                given = " ".join(map(str, self.size))
                raise UserInputError(f"--size of a MedMNIST dataset must be 28 or 64, got {given}")
        elif self.size is not None and (len(self.size) not in (1, 3) or min(self.size) < 1):
            raise UserInputError(f"--size needs 1 or 3 positive sizes (X Y Z), got {' '.join(map(str, self.size))}")
        self._check_stem()

    def _check_stem(self) -> None:
        """The model flags checked before any volume is read: one stride per stem stage, and a manifest ``--size``
        whose X, Y and Z are each a multiple of the CNN stride."""
        channels, strides = self.stem()
        if len(channels) != len(strides):
            raise UserInputError(f"--stem-channels and --stem-strides need one value per CNN stage, got "
                                 f"{' '.join(map(str, channels))} and {' '.join(map(str, strides))}")
        if min(*channels, *strides) < 1:
            raise UserInputError("--stem-channels and --stem-strides must be positive")
        if self.pool is not None and self.pool not in POOLS:
            raise UserInputError(f"--pool must be one of {', '.join(POOLS)}, got {self.pool!r}")
        if self.manifest is None:
            return
        size, stride = self.input_size, self.stride
        bad = [f"{axis} = {n}" for axis, n in zip("XYZ", size) if n % stride]
        if bad:
            suggestion = " ".join(str(max(stride, round(n / stride) * stride)) for n in size)
            raise UserInputError(
                f"--size {' '.join(map(str, size))}: each of X, Y and Z must be a multiple of the CNN stride {stride} "
                f"({', '.join(bad)} {'is' if len(bad) == 1 else 'are'} not); e.g. --size {suggestion} (the stride is --unshuffle times the product of "
                "--stem-strides: 16 by default above 32 voxels, 8 up to 32)")

    @property
    def dataset_name(self) -> str | None:
        """The MedMNIST dataset trained on, or ``None`` for a manifest."""
        return None if self.manifest is not None else self.dataset or DEFAULT_DATASET

    @property
    def input_size(self) -> tuple[int, int, int]:
        """Spatial size of the volumes before stride padding: the MedMNIST edge cubed, or the manifest's size."""
        if self.manifest is None:
            return (self.size[0] if self.size else DEFAULT_MEDMNIST_SIZE,) * 3  # type: ignore[return-value]
        if self.size is None:
            return DEFAULT_MANIFEST_SIZE
        return tuple(self.size * 3 if len(self.size) == 1 else self.size)  # type: ignore[return-value]

    def preprocessing(self) -> VolumePreprocessing:
        """The NIfTI/DICOM steps of a manifest run: orientation (RAS), spacing, window, then resize or crop/pad."""
        size = self.input_size
        return VolumePreprocessing(orientation=self.orientation or "RAS", spacing=self.spacing, window=self.window,
                                   resize=size if self.fit == "resize" else None,
                                   size=size if self.fit == "crop-pad" else None)

    def unshuffle_factor(self) -> int:
        """``unshuffle``, by default 2 above :data:`STEM_EDGE` voxels (64³: the stem sees 32³ volumes of 8 channels,
        at about the cost of 28³) and 1 (no folding) up to it."""
        if self.unshuffle is not None:
            return self.unshuffle
        return 2 if max(self.input_size) > STEM_EDGE else 1

    def stem(self) -> tuple[list[int], list[int]]:
        """Channels and strides of the CNN stages: 4 stages (stride 16) when the stem sees more than 32 voxels (the
        input size divided by :meth:`unshuffle_factor`), else 3 (stride 8).

        Up to 32 voxels the first stages are narrow (8, 16, 64), which keeps small inputs cheap."""
        stages = 4 if max(self.input_size) > STEM_EDGE * self.unshuffle_factor() else 3
        default = [16, 32, 64, 96] if stages == 4 else [8, 16, 64]
        channels = self.stem_channels or ([4, 8, 8, 8][:stages] if self.quick else default)
        strides = self.stem_strides or [2] * stages
        return list(channels), list(strides)

    @property
    def pool_name(self) -> str:
        """What the classifier reads (:data:`~bioattn.models.hybrid_ct.POOLS`): ``pool``, by default ``cls+max`` for
        your own volumes (a small finding in one token reaches the classifier directly; docs/experiments.md, issue
        54) and ``cls`` for MedMNIST (the layout its published numbers were measured with)."""
        if self.pool is not None:
            return self.pool
        return DEFAULT_MANIFEST_POOL if self.manifest is not None else "cls"

    @property
    def stride(self) -> int:
        """The model's total downsampling (:meth:`unshuffle_factor` times the stem strides); volumes are padded to a
        multiple of it."""
        return self.unshuffle_factor() * math.prod(self.stem()[1])



def resolve_protocol(options: CTOptions) -> Protocol:
    """The protocol of ``options.protocol`` with ``label_smoothing``, ``intensity_jitter``, ``tta`` and ``mixup``
    applied."""
    protocol = recipe_for(PROTOCOLS, options.protocol, flag="--protocol")
    if options.label_smoothing is not None and not 0.0 <= options.label_smoothing < 1.0:
        raise UserInputError(f"--label-smoothing must be in [0, 1), got {options.label_smoothing}")
    if options.intensity_jitter is not None and not 0.0 <= options.intensity_jitter < 1.0:
        raise UserInputError(f"--intensity-jitter must be in [0, 1), got {options.intensity_jitter}")
    if options.tta not in (None, "none", "flips"):
        raise UserInputError(f"--tta must be none or flips, got {options.tta!r}")
    if options.mixup is not None:
        try:
            check_mixup_alpha(options.mixup, name="--mixup")
        except ValueError as exc:
            raise UserInputError(str(exc)) from exc
    return dataclasses.replace(
        protocol,
        label_smoothing=protocol.label_smoothing if options.label_smoothing is None else options.label_smoothing,
        intensity_jitter=protocol.intensity_jitter if options.intensity_jitter is None else options.intensity_jitter,
        flip_tta=protocol.flip_tta if options.tta is None else options.tta == "flips",
        mixup=protocol.mixup if options.mixup is None else options.mixup,
    )


def protocol_train_config(
    protocol: str, config: TrainConfig | None = None, *, quick: bool = False, keep_milestones: bool = False
) -> TrainConfig:
    """``config`` (default: the protocol's), shrunk to 2 epochs of 3 steps of 8 with ``quick`` (no small-data
    minimums); the step-decay
    milestones move to 50 % and 75 % of ``max_epochs`` unless ``keep_milestones`` (a YAML file set them)."""
    config = config or recipe_for(PROTOCOLS, protocol, flag="--protocol").train_config
    if quick:
        config = dataclasses.replace(config, max_epochs=2, max_steps_per_epoch=3, batch_size=8, min_steps=0,
                                     min_batches_per_epoch=0)
    if not keep_milestones:
        config = dataclasses.replace(config, milestones=(config.max_epochs // 2, config.max_epochs * 3 // 4))
    return config


def build_models(
    options: CTOptions, num_classes: int, in_channels: int, class_names: list[str] | None = None, *,
    seed: int | None = None,
) -> tuple[HybridCT3D, nn.Module | None]:
    """The attention model and the MONAI ResNet baseline (``None`` with ``baseline="none"``); tiny with ``quick``.
    With ``options.distance_channel`` both get the depth inside the mask as one more input channel.

    With ``seed``, the baseline is initialised right after ``torch.manual_seed(seed)``, so its initial weights do
    not depend on the attention model's options (the attention model starts from the caller's RNG state).
    """
    channels, strides = options.stem()
    try:
        hybrid = HybridCT3D(
            in_channels, num_classes, stem_channels=channels, stem_strides=strides, stem_depth=options.stem_depth,
            unshuffle=options.unshuffle_factor(), distance_channel=bool(options.distance_channel),
            embed_dim=24 if options.quick else options.embed_dim, num_heads=2 if options.quick else options.heads,
            num_layers=1 if options.quick else options.layers, dropout=options.dropout, class_names=class_names,
            pool=options.pool_name,
        )
    except ValueError as exc:
        raise UserInputError(f"invalid model options: {exc}") from exc
    if options.baseline == "none":
        return hybrid, None
    if seed is not None:
        torch.manual_seed(seed)
    widths = [4, 8, 16, 32] if options.quick else [8, 16, 32, 64]
    # its first convolution strides by the attention model's unshuffle factor: 64³ costs it about what 32³ does;
    # the same input as the attention model (with distance_channel, the depth inside the mask too)
    baseline = ResNetCT3D(in_channels, num_classes, widths=widths, layers=[1, 1, 1, 1] if options.quick else [2, 2, 2, 2],
                          conv1_stride=options.unshuffle_factor(), distance_channel=bool(options.distance_channel),
                          input_multiple=hybrid.stride, class_names=class_names)
    return hybrid, baseline


def _class_names(options: CTOptions, data: CTData) -> list[str] | None:
    if data.class_names is not None:
        return data.class_names
    names = CLASS_NAMES.get(options.dataset_name or "")
    return list(names) if names and len(names) == data.num_classes else None


def _load_data(options: CTOptions, config: TrainConfig, stride: int) -> CTData:
    if options.manifest is None:
        return load_medmnist(resolve_data_root(options.data_root), options.dataset_name or DEFAULT_DATASET,
                             options.input_size[0], divisible_by=stride)
    return load_manifest(options.manifest, options.preprocessing(), seed=config.seed,
                         positive_class=options.positive_class)


def _scores(labels: np.ndarray, probs: np.ndarray, split: str) -> dict[str, float]:
    return with_prefix(split, classification_metrics(labels, probs))


def prepare_for_training(model: nn.Module, config: TrainConfig) -> None:
    """Channels-last stem weights for a :class:`HybridCT3D` trained in fp32 (faster oneDNN convolutions), contiguous
    under bf16 autocast (where channels-last gave wrong weight gradients); see :meth:`HybridCT3D.channels_last_stem`."""
    if isinstance(model, HybridCT3D):
        model.channels_last_stem(config.precision == "fp32")


def train_one(
    name: str, model: nn.Module, run_dir: Path, data: CTData, config: TrainConfig, protocol: Protocol, *,
    augment: bool = True, resume: bool = False, run_info: dict[str, Any] | None = None, select_best: bool = True,
) -> dict[str, Any]:
    """Train ``model`` with the shared Trainer (best ``val_auroc`` kept); return its metrics (rank 0; ``{}`` elsewhere).

    Validation numbers use the protocol's evaluation (flip averaging under ``tuned``); ``val_auroc_no_tta`` is the
    same weights without it, ``val_auroc_last_epoch`` the final weights; ``test_*`` when ``data`` has a test split.
    ``select_best=False`` (cross-validation folds) never looks at the validation split: the final weights are kept
    and the caller scores them.
    """
    augmentation = train_augmentation(intensity_jitter=protocol.intensity_jitter) if augment else None
    train_set = data.augmented(augmentation) if augmentation is not None else data.splits["train"]
    val_set, val_labels = data.splits["val"], data.labels["val"]

    def loss_fn(module: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        images, labels = batch
        return mixup_cross_entropy(module, images, labels, alpha=protocol.mixup,
                                   label_smoothing=protocol.label_smoothing)

    def evaluate(module: nn.Module) -> dict[str, float]:
        probs = predict_probabilities(module, val_set, batch_size=config.batch_size, flip_tta=protocol.flip_tta)
        metrics = _scores(val_labels, probs, "val")
        if protocol.flip_tta:  # the same weights without test-time averaging, for comparison
            plain = predict_probabilities(module, val_set, batch_size=config.batch_size)
            metrics["val_auroc_no_tta"] = _scores(val_labels, plain, "val")["val_auroc"]
        return metrics

    print(f"[{name}] {count_parameters(model) / 1e6:.2f} M parameters, training in {run_dir}", file=sys.stderr)
    trainer = Trainer(model, train_set, config, run_dir, loss_fn=loss_fn, evaluate=evaluate if select_best else None,
                      resume=resume, run_info=run_info)
    result, info = fit_timed(trainer)
    if not is_main_process():
        return {}
    if not select_best:  # the caller scores the final weights
        plot_curves(run_dir)
        return {**info, "val_history": []}
    history = result.history
    metrics: dict[str, Any] = {
        **info,
        "val_history": [{key: h[key] for key in HISTORY_KEYS if key in h} for h in history],
        **{k: v for k, v in result.best_metrics.items() if k.startswith("val_")},
        # the last evaluation, free of the best-epoch selection on the validation split
        "val_auroc_last_epoch": history[-1].get("val_auroc") if history else None,
    }
    if "test" in data.splits:
        probs = predict_probabilities(model, data.splits["test"], batch_size=config.batch_size,
                                      flip_tta=protocol.flip_tta)
        metrics.update(_scores(data.labels["test"], probs, "test"))
    kept = predict_probabilities(model, val_set, batch_size=config.batch_size, flip_tta=protocol.flip_tta)
    binary = kept.shape[1] == 2
    # the cut on the positive class the validation split supports (0.5 unless another one separates it better)
    threshold = decision_threshold(val_labels, kept[:, 1]) if binary else 0.5
    metrics["threshold"] = threshold
    metrics["trust"] = trust_report(val_labels, kept[:, 1] if binary else kept, threshold=threshold,
                                    class_names=data.class_names, headline="auroc", split="validation",
                                    cv_hint="--cv 5")
    if threshold != 0.5:
        metrics["trust"]["warnings"].append(
            f"note: the decision threshold is {threshold:.4g} on p({(data.class_names or ['0', '1'])[1]}), chosen on "
            "these validation volumes (at 0.5 they separate worse); predict ct and explain ct apply it; the accuracy "
            "above is at 0.5, and on the volumes it was chosen on the threshold's own accuracy is optimistic")
    plot_curves(run_dir)
    return metrics


def comparison_table(dataset: str | None, results: dict[str, dict[str, Any]]) -> str:
    """Markdown table: this run's models (val, and test when present) beside the published MedMNIST numbers."""
    header = ["model", "params", "val AUROC", "val accuracy", "test AUROC", "test accuracy", "source"]
    rows: list[list[Any]] = [
        [name, f"{m['parameters'] / 1e6:.2f} M", m.get("val_auroc"), m.get("val_accuracy"), m.get("test_auroc"),
         m.get("test_accuracy"), f"this run ({m['epochs_run']} epochs, "
                                 f"{m['train_wall_minutes_this_invocation']:.1f} min wall, "
                                 f"{m['train_cpu_minutes_this_invocation']:.1f} CPU-min)"]
        for name, m in results.items()
    ]
    rows += [[name, None, None, None, auroc, accuracy, "MedMNIST v2 paper, official test split"]
             for name, (auroc, accuracy) in PUBLISHED.get(dataset or "", {}).items()]
    return format_table(header, rows)


def _options_record(options: CTOptions) -> dict[str, Any]:
    """JSON-ready options for ``run_config.json``."""
    record = {f.name: getattr(options, f.name) for f in dataclasses.fields(options) if f.name != "train_config"}
    return {k: str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v for k, v in record.items()}


class _Augmented(Dataset):
    """``(transform(image), label)`` of the ``(image, label)`` items of ``base``."""

    def __init__(self, base: Dataset, transform: Any) -> None:
        self.base, self.transform = base, transform

    def __len__(self) -> int:
        return len(self.base)  # type: ignore[arg-type]

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image, label = self.base[index]
        return apply_random_transform(self.transform, image), label


def _pool_records(data: CTData) -> list[str]:
    """Where each volume of the cross-validation pool (train, then val) came from: its manifest image, else
    ``train[i]`` / ``val[i]`` (its index in that split of the ``.npz``)."""
    records: list[str] = []
    for split in ("train", "val"):
        if data.rows is not None:
            records += [str(row.image) for row in data.rows[split]]
        else:
            records += [f"{split}[{i}]" for i in range(len(data.labels[split]))]
    return records


def fold_data(data: CTData, train_index: np.ndarray, held_out_index: np.ndarray) -> CTData:
    """``data`` with train + val pooled and re-split: ``train`` = ``train_index``, ``val`` = ``held_out_index`` of the pool
    (indices into train followed by val); a test split stays as it is."""
    pool = ConcatDataset([data.splits["train"], data.splits["val"]])
    labels = np.concatenate([data.labels["train"], data.labels["val"]])
    train = Subset(pool, train_index.tolist())
    splits = {"train": train, "val": Subset(pool, held_out_index.tolist())}
    split_labels = {"train": labels[train_index], "val": labels[held_out_index]}
    if "test" in data.splits:
        splits["test"], split_labels["test"] = data.splits["test"], data.labels["test"]
    return dataclasses.replace(data, splits=splits, labels=split_labels, rows=None,
                               augmented=lambda transform: _Augmented(train, WithoutMetadata([transform])))


@dataclass
class _Trained:
    """One member run: its metrics per model name and the trained models (baseline ``None`` without one)."""

    results: dict[str, dict[str, Any]]
    hybrid: HybridCT3D
    baseline: nn.Module | None


def _train_pair(options: CTOptions, data: CTData, config: TrainConfig, protocol: Protocol, run_dir: Path,
                run_info: dict[str, Any], saved: SavedPreprocessing, *, select_best: bool = True) -> _Trained:
    """Train the attention model and the baseline on ``data`` into ``run_dir`` (a complete run directory)."""
    seed_everything(config.seed)
    hybrid, baseline = build_models(options, max(data.num_classes, 2), data.in_channels, _class_names(options, data),
                                    seed=config.seed)
    common = dict(augment=options.augment, resume=options.resume and run_dir.exists(), run_info=run_info,
                  select_best=select_best)
    prepare_for_training(hybrid, config)
    results = {HYBRID_NAME: train_one("hybrid", hybrid, run_dir, data, config, protocol, **common)}
    if baseline is not None:  # in fp32: under bf16 autocast its gradient norm overflows at the first step
        seed_everything(config.seed)  # the attention model's starting RNG state: its options do not move the baseline
        results[BASELINE_NAME] = train_one("baseline", baseline, run_dir / BASELINE_DIR, data,
                                           dataclasses.replace(config, precision="fp32"), protocol, **common)
    if is_main_process():
        hybrid.save_pretrained(run_dir)
        dataclasses.replace(saved, threshold=results[HYBRID_NAME].get("threshold", 0.5)).save(run_dir)
        if baseline is not None:  # a run directory of its own: predict ct / explain ct --model RUN/baseline_resnet
            baseline.save_pretrained(run_dir / BASELINE_DIR)
            dataclasses.replace(saved, threshold=results[BASELINE_NAME].get("threshold", 0.5)).save(run_dir / BASELINE_DIR)
        if select_best:
            plot_metric_per_epoch(
                {f"{name} ({m['parameters'] / 1e6:.2f} M)":
                 [(h["epoch"], h["val_auroc"]) for h in m["val_history"] if h.get("val_auroc") is not None]
                 for name, m in results.items()},
                run_dir / VAL_CURVE_NAME, ylabel="validation AUROC",
            )
    return _Trained(results, hybrid, baseline)


def _models(trained: _Trained) -> dict[str, nn.Module]:
    return {HYBRID_NAME: trained.hybrid, **({BASELINE_NAME: trained.baseline} if trained.baseline is not None else {})}


def _ensemble_scores(members: list[_Trained], data: CTData, protocol: Protocol, batch_size: int) -> dict[str, Any]:
    """Each model's ensemble (mean probability over ``members``) scored on val (and test)."""
    scores: dict[str, Any] = {}
    for name in _models(members[0]):
        ensemble = Ensemble([_models(m)[name] for m in members])
        scores[name] = {}
        for split in [s for s in ("val", "test") if s in data.splits]:
            probs = predict_probabilities(ensemble, data.splits[split], batch_size=batch_size, flip_tta=protocol.flip_tta)
            scores[name].update(_scores(data.labels[split], probs, split))
    return scores


def _summaries(members: list[_Trained]) -> dict[str, dict[str, Any]]:
    """Mean ± sd over members of each model's numeric metrics."""
    return {name: mean_std([{k: v for k, v in m.results[name].items() if isinstance(v, (int, float))} for m in members])
            for name in members[0].results}


def _train_seeds(options: CTOptions, data: CTData, config: TrainConfig, protocol: Protocol, run_dir: Path,
                 run_info: dict[str, Any], saved: SavedPreprocessing) -> dict[str, Any]:
    """One run per seed (``seed<S>/``) on the same split; the run directory becomes the attention models' ensemble."""
    assert options.seeds is not None
    plan = seed_members(run_dir, options.seeds, config.seed)
    members = train_members(plan, lambda member: _train_pair(
        options, data, dataclasses.replace(config, seed=member.index), protocol, member.run_dir, run_info, saved))
    if not is_main_process():
        return {}
    save_members(run_dir, "HybridCT3D", plan)
    saved.save(run_dir)
    return {"ensemble": _ensemble_scores(members, data, protocol, config.batch_size), "members": _summaries(members),
            "seeds": {str(seed): m.results for seed, m in zip(options.seeds, members)}}


def mean_mask_depth(volumes: Dataset) -> np.ndarray:
    """``(N,)``: the mean :func:`~bioattn.data.ct.foreground_distance` over each volume's mask (0 for an empty mask);
    ``volumes`` serves ``(image (C, X, Y, Z), label)`` items."""
    depths = []
    for index in progress_bar(range(len(volumes)), desc="mean depth inside the mask",  # type: ignore[arg-type]
                              leave=False):
        image = volumes[index][0][None]
        depth = foreground_distance(image)[0, 0]
        inside = image[0, 0] > 0.5
        depths.append(float(depth[inside].mean()) if inside.any() else 0.0)
    return np.asarray(depths)


def depth_baseline_probabilities(train_depth: np.ndarray, train_labels: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Class probabilities ``(N, C)`` of a logistic regression on the mean mask depth alone, fitted on the training
    volumes: the one-number baseline of binary-mask runs (how far thickness alone goes)."""
    model = make_pipeline(StandardScaler(), LogisticRegression()).fit(train_depth[:, None], train_labels)
    return model.predict_proba(depth[:, None])


def _train_cv(options: CTOptions, data: CTData, config: TrainConfig, protocol: Protocol, run_dir: Path,
              run_info: dict[str, Any], saved: SavedPreprocessing) -> dict[str, Any]:
    """K-fold stratified CV over train + val (``fold<k>/``, final weights, no selection on the held-out fold);
    out-of-fold metrics of the pooled predictions; the run directory becomes the K attention models' ensemble."""
    assert options.cv is not None
    labels = np.concatenate([data.labels["train"], data.labels["val"]])
    repeats = options.cv_repeats
    plan = cv_members(run_dir, repeated_folds(
        options.cv, repeats, config.seed,
        lambda k, seed: StratifiedKFold(k, shuffle=True, random_state=seed).split(np.zeros(len(labels)), labels)))
    out_of_fold = OutOfFold(len(labels), options.cv, repeats)
    folds: list[dict[str, Any]] = []
    # binary masks: how far the mean depth inside the mask goes alone, on the same folds
    depth = mean_mask_depth(ConcatDataset([data.splits["train"], data.splits["val"]])) \
        if saved.profile.get("binary") and is_main_process() else None

    def train_fold(member: Member) -> _Trained:
        train_index, held_index = member.train_index, member.held_out_index
        assert train_index is not None and held_index is not None
        folded = fold_data(data, train_index, held_index)
        trained = _train_pair(options, folded, config, protocol, member.run_dir, run_info, saved, select_best=False)
        if not is_main_process():
            return trained
        folds.append({})
        held_out: dict[str, np.ndarray] = {}
        for name, model in _models(trained).items():
            held_out[name] = predict_probabilities(model, folded.splits["val"], batch_size=config.batch_size,
                                                   flip_tta=protocol.flip_tta)
            folds[-1][name] = _scores(labels[held_index], held_out[name], "val")
            trained.results[name].update(folds[-1][name])
        if depth is not None:
            held_out[DEPTH_BASELINE_NAME] = depth_baseline_probabilities(depth[train_index], labels[train_index],
                                                                         depth[held_index])
            folds[-1][DEPTH_BASELINE_NAME] = _scores(labels[held_index], held_out[DEPTH_BASELINE_NAME], "val")
        out_of_fold.add(member, held_out)  # the mean over repeats of each volume's out-of-fold probability
        write_json(member.run_dir / "fold_metrics.json", {"train_index": train_index.tolist(),
                                                          "held_out_index": held_index.tolist(), "scores": folds[-1]})
        return trained

    members = train_members(plan, train_fold)
    if not is_main_process():
        return {}
    save_members(run_dir, "HybridCT3D", plan)
    saved.save(run_dir)
    oof, fold_of = out_of_fold.probabilities, out_of_fold.fold_of
    class_names = _class_names(options, data) or [str(k) for k in range(next(iter(oof.values())).shape[1])]
    write_out_of_fold(run_dir, _pool_records(data), fold_of, labels, class_names,
                      {OOF_PREFIXES[name]: probs for name, probs in oof.items()})
    results: dict[str, Any] = {
        "oof": {name: _scores(labels, probs, "oof") for name, probs in oof.items()},
        "cv": {name: mean_std([fold[name] for fold in folds]) for name in folds[0]},
        "members": _summaries(members), "folds": folds,
    }
    if "test" in data.splits:
        results["ensemble"] = _ensemble_scores(members, data, protocol, config.batch_size)
    return results


def ensemble_table(results: dict[str, Any]) -> str:
    """Markdown table of a ``--seeds`` / ``--cv`` run: per model the ensemble or out-of-fold AUROC and accuracy
    beside the mean ± sd over members."""
    key = "oof" if "oof" in results else "val"
    header = ["model", f"{'out-of-fold' if key == 'oof' else 'ensemble val'} AUROC", "accuracy",
              f"members' {'held-out fold' if key == 'oof' else 'val'} AUROC (mean ± sd)", "CPU-min (sum)"]
    rows = []
    for name, summary in results["members"].items():
        headline = results["oof"][name] if key == "oof" else results["ensemble"][name]
        cpu = summary.get("train_cpu_minutes_this_invocation", {})
        rows.append([name, headline.get(f"{key}_auroc"), headline.get(f"{key}_accuracy"),
                     format_mean_sd(summary.get("val_auroc"), 3),
                     f"{cpu.get('mean', 0) * cpu.get('n', 0):.1f}" if cpu else None])
    for name in [n for n in results.get("oof", {}) if n not in results["members"]]:  # baselines without members
        rows.append([name, results["oof"][name].get("oof_auroc"), results["oof"][name].get("oof_accuracy"),
                     format_mean_sd(results["cv"][name].get("val_auroc"), 3), None])
    return format_table(header, rows)


def trust_sections(results: dict[str, Any], run_dir: Path | None = None) -> list[str]:
    """The trust part of ``summary.md`` (see :mod:`bioattn.tasks.trust`): per model of a single run its warnings
    (each naming the model) and confusion matrix on validation, and a warning when the baseline beats the attention
    model's validation AUROC, with the command that uses the baseline (``run_dir``); nothing for ensembles (their
    tables give mean ± sd over members)."""
    models = results.get("models")
    if not models:
        return []
    for name, m in models.items():
        report = m.get("trust") or {}
        report["warnings"] = [_naming(line, name) for line in report.get("warnings", [])]
    sections = [format_trust(m["trust"], name) for name, m in models.items() if m.get("trust")]
    hybrid = models.get(HYBRID_NAME, {})
    beaten = baseline_warning(HYBRID_NAME, hybrid.get("val_auroc"),
                              {name: m.get("val_auroc") for name, m in models.items() if name != HYBRID_NAME},
                              "validation AUROC")
    if beaten and BASELINE_NAME in models and run_dir is not None:
        beaten += (f"; it is saved as a run of its own: bioattn predict ct --model {run_dir / BASELINE_DIR} --input "
                   "SCAN --output predictions.csv (explain ct --model accepts it too)")
    if beaten:
        hybrid.setdefault("trust", {}).setdefault("warnings", []).append(beaten)
        sections.insert(0, beaten)
    return sections


def _naming(line: str, model: str) -> str:
    """``"warning: ..."`` → ``"warning: [model] ..."`` (the same for ``note:``), once."""
    for prefix in ("warning: ", "note: "):
        if line.startswith(prefix) and not line.startswith(f"{prefix}[{model}]"):
            return f"{prefix}[{model}] {line[len(prefix):]}"
    return line


def with_default_window(options: CTOptions, seed: int) -> CTOptions:
    """``options`` with the soft-tissue window (:data:`~bioattn.tasks.ct.data.SOFT_TISSUE_WINDOW`) when they train
    on a manifest without a window and its training volumes are CT in Hounsfield units
    (:func:`~bioattn.tasks.ct.data.hounsfield_window`); saved with the model like a given ``--intensity-window``."""
    if options.manifest is None or options.window is not None:
        return options
    window = hounsfield_window(options.manifest, seed=seed)
    if window is None:
        return options
    if is_main_process():
        print(f"note: the volumes are CT in Hounsfield units; intensities {window[0]:g}..{window[1]:g} HU (soft "
              "tissue) are mapped onto 0..1 (--intensity-window LOW HIGH sets another window)", file=sys.stderr)
    return dataclasses.replace(options, window=window)


def not_learned_hints(data: CTData, saved: SavedPreprocessing, models: dict[str, dict[str, Any]]) -> list[str]:
    """``hint:`` lines for ``summary.md`` when the attention model of a single manifest run did not learn (its
    validation accuracy is at chance, or its trust report warns, e.g. that it predicts one class): the likely causes this run shows (few training
    volumes of a class, intensities not windowed, little contrast in the model input) and what to try. Empty when the
    model learned, and for MedMNIST runs."""
    hybrid = models.get(HYBRID_NAME, {})
    report = hybrid.get("trust") or {}
    counts = list((report.get("class_counts") or {}).values())
    at_chance = bool(counts) and hybrid.get("val_accuracy", 1.0) <= max(counts) / sum(counts) + 1e-9
    warned = any(line.startswith("warning: ") for line in report.get("warnings", []))
    if data.source != "manifest" or not (warned or at_chance):
        return []
    counts = np.bincount(data.labels["train"])
    smallest = int(counts[counts > 0].min())
    hints = [f"hint: the attention model is trained from scratch on {len(data.labels['train'])} volumes "
             f"({smallest} of the smallest class); with a few dozen, a small or faint finding often stays below what "
             "it can pick up: more volumes help most, and --cv 5 shows whether any split learns"]
    profile = saved.profile
    if data.preprocessing is not None and data.preprocessing.window is None and not profile.get("binary"):
        hints.append(f"hint: the inputs were not windowed (they span {profile.get('intensity_min', 0):.4g}.."
                     f"{profile.get('intensity_max', 0):.4g}); --intensity-window LOW HIGH maps the range of the finding onto "
                     "0..1 (CT: e.g. -160 240 HU for soft tissue)")
    size = data.preprocessing.output_size if data.preprocessing is not None else None
    largest = profile.get("shape_max")
    if size is not None and largest is not None and any(n > s for n, s in zip(largest, size)):
        hints.append(f"hint: volumes of up to {' x '.join(map(str, largest))} voxels are resized to "
                     f"{' x '.join(map(str, size))}: a finding a few voxels across shrinks further (a larger --size, "
                     "or --spacing with --fit crop-pad, keeps its detail)")
    return hints


def train_ct(options: CTOptions) -> dict[str, Any]:
    """Train the attention model (and the baseline) as ``options`` say; return what ``metrics.json`` holds.

    ``options.seeds``: one complete run per seed on the same split; ``options.cv``: K-fold cross-validation over
    train + val. Either way the run directory loads as the attention models' ensemble (mean probability).
    """
    check_run_dir(options.out, resume=options.resume, overwrite=options.overwrite)  # before any volume is read
    if options.manifest is not None and options.positive_class is not None:  # the labels only, no volume yet
        from bioattn.data.ct_manifest import class_names_of, read_manifest

        manifest = read_manifest(options.manifest, require_labels=True)
        try:
            order_binary_classes(class_names_of([row.label for row in manifest.rows]), options.positive_class)
        except UserInputError as exc:
            raise UserInputError(f"{manifest.path}: {exc}") from None
    protocol = resolve_protocol(options)
    config = options.train_config or protocol_train_config(options.protocol, quick=options.quick)
    options = with_default_window(options, config.seed)
    data = _load_data(options, config, options.stride)
    run_dir = prepare_run_dir(options.out, resume=options.resume, overwrite=options.overwrite)
    print(f"{data.path}: " + ", ".join(f"{s} {n}" for s, n in data.split_sizes.items()), file=sys.stderr)
    if data.source == "manifest" and is_main_process():
        write_split_table(run_dir / "splits.csv", data)
    saved = SavedPreprocessing(source=data.source, preprocessing=data.preprocessing or VolumePreprocessing(),
                               flip_tta=protocol.flip_tta, profile=data.training_profile())
    if options.distance_channel is None:
        options = dataclasses.replace(options, distance_channel=bool(saved.profile["binary"]))
        if options.distance_channel:
            print("the training volumes are binary masks: the attention model also sees each voxel's depth inside "
                  "the mask (--no-distance-channel turns this off)", file=sys.stderr)
    # what actually ran: the file read (data root resolved) and the model built (--quick sizes applied)
    model_config = build_models(dataclasses.replace(options, baseline="none"), max(data.num_classes, 2), data.in_channels,
                                _class_names(options, data))[0].config
    run_info = {**_options_record(options), "data_file": str(data.path.resolve()), "model": model_config}
    if options.cv is not None:
        results = _train_cv(options, data, config, protocol, run_dir, run_info, saved)
    elif options.seeds is not None:
        results = _train_seeds(options, data, config, protocol, run_dir, run_info, saved)
    else:
        results = {"models": _train_pair(options, data, config, protocol, run_dir, run_info, saved).results}
    if not is_main_process():
        return {}
    dataset = options.dataset_name
    metrics = {
        "dataset": dataset,
        "manifest": str(data.path) if data.source == "manifest" else None,
        "size": list(options.input_size),
        "file": str(data.path),
        "class_names": model_config["class_names"],
        "positive_class": model_config["class_names"][1] if len(model_config["class_names"] or []) == 2 else None,
        "split_sizes": data.split_sizes,
        "test_split_present": "test" in data.splits,
        "preprocessing": data.preprocessing.to_dict() if data.preprocessing else None,
        "protocol": {"name": options.protocol, "description": PROTOCOLS[options.protocol].description,
                     "label_smoothing": protocol.label_smoothing, "intensity_jitter": protocol.intensity_jitter,
                     "flip_tta": protocol.flip_tta, "mixup": protocol.mixup, "augment": options.augment,
                     "train": config.to_dict(), "seeds": list(options.seeds) if options.seeds else None,
                     "cv_folds": options.cv, "cv_repeats": options.cv_repeats},
        **results,
        "published_test_auroc_accuracy": {k: {"auroc": a, "accuracy": c}
                                          for k, (a, c) in PUBLISHED.get(dataset or "", {}).items()},
    }
    table = comparison_table(dataset, results["models"]) if "models" in results else ensemble_table(results)
    positive = order_binary_classes(data.class_names, options.positive_class)[1] if data.class_names else None
    trust = trust_sections(results, run_dir)
    if positive:
        trust.insert(0, positive)
    hints = not_learned_hints(data, saved, results["models"]) if "models" in results else []
    if hints:
        trust.insert(0, "\n".join(hints))
    write_json(run_dir / "metrics.json", metrics)
    write_text(run_dir / "summary.md", "\n\n".join([table, *trust]) + "\n")
    print(table)
    for section in trust:
        print(f"\n{section}")
    if "test" not in data.splits:
        print("note: no test split; this run's numbers are validation numbers"
              + (", the published ones are test numbers (compare with care)" if dataset in PUBLISHED else ""))
    print(f"wrote {run_dir / 'metrics.json'}")
    return metrics
