"""3D volume classification: the hybrid CNN + attention model beside a MONAI 3D ResNet, on MedMNIST 3D or your own
NIfTI/DICOM volumes listed in a labels CSV.

:func:`train_ct` (``bioattn train ct``) trains both models in one run, on the same split, with the same protocol,
budget and augmentation, and writes into the run directory:

- ``config.json`` + ``model.safetensors`` (the attention model, for ``bioattn predict ct`` / ``explain ct``; the
  class names are saved with it) and ``preprocessing.json`` (the NIfTI/DICOM preprocessing, flip test-time
  averaging, and a profile of the training volumes, see :mod:`bioattn.tasks.ct_preprocessing`);
- ``metrics.json`` (every number with the protocol that produced it; keys ``val_auroc``, ``val_accuracy``,
  ``val_mcc``, ``val_f1``, ``val_loss``, ``val_auroc_no_tta``, ``val_auroc_last_epoch``, ``test_*`` when there is a
  test split), ``val_auc.png`` (validation AUROC per epoch of both models), ``training_curve.png``,
  ``train_log.csv``, ``checkpoint/`` (``resume`` continues), ``splits.csv`` (manifest runs: the split of every
  volume), and the same for the baseline in ``baseline_resnet/``.

Protocols (:data:`PROTOCOLS`): ``medmnist`` is MedMNIST v2's official one (Adam, lr 1e-3, batch 32, no weight decay,
lr x0.1 at 50 % and 75 % of the epochs, best validation AUROC kept, scored on the test split when there is one);
``tuned`` trains 15 epochs with AdamW (weight decay 0.05), warm-up + cosine decay, label smoothing 0.1, no
intensity jitter, and averages each prediction over the 8 flips of the volume. Runs under ``torchrun`` (only rank
0 evaluates and writes).
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
from monai.networks.nets import ResNet
from torch import nn

from bioattn.data import resolve_data_root
from bioattn.data.ct import VolumePreprocessing, train_augmentation
from bioattn.errors import UserInputError
from bioattn.explain.figures import plot_metric_per_epoch
from bioattn.io import save_tensors, write_json
from bioattn.metrics import classification_metrics, with_prefix
from bioattn.models.hybrid_ct import HybridCT3D, predict_probabilities
from bioattn.report import format_table
from bioattn.tasks.common import count_parameters, fit_timed
from bioattn.tasks.ct_data import CTData, load_manifest, load_medmnist, write_split_table
from bioattn.tasks.ct_preprocessing import SavedPreprocessing
from bioattn.training import TrainConfig, Trainer, plot_curves, prepare_run_dir, seed_everything
from bioattn.training.distributed import is_main_process

__all__ = [
    "MEDMNIST_DEFAULTS",
    "TUNED_DEFAULTS",
    "PROTOCOLS",
    "PUBLISHED",
    "DEFAULT_DATASET",
    "DEFAULT_MANIFEST_SIZE",
    "Protocol",
    "CTOptions",
    "resolve_protocol",
    "protocol_train_config",
    "build_models",
    "train_one",
    "train_ct",
]

MEDMNIST_DEFAULTS = TrainConfig(
    max_epochs=100, batch_size=32, lr=1e-3, optimizer="adam", weight_decay=0.0, schedule="multistep",
    milestones=(50, 75), gamma=0.1, grad_clip=None, monitor="val_auroc", monitor_mode="max",
)
# AdamW + weight decay, 40 steps of warm-up then cosine decay, gradient clipping; sized so the attention model
# trains in about 9 CPU-minutes at 28³ on one thread.
TUNED_DEFAULTS = TrainConfig(
    max_epochs=15, batch_size=32, lr=1e-3, optimizer="adamw", weight_decay=0.05, schedule="warmup_cosine",
    warmup_steps=40, grad_clip=1.0, monitor="val_auroc", monitor_mode="max",
)


@dataclass(frozen=True)
class Protocol:
    """A training protocol: optimisation defaults plus the loss, augmentation and evaluation options."""

    train: TrainConfig
    label_smoothing: float
    intensity_jitter: float
    flip_tta: bool
    description: str


PROTOCOLS = {
    "medmnist": Protocol(
        MEDMNIST_DEFAULTS, label_smoothing=0.0, intensity_jitter=0.1, flip_tta=False,
        description="MedMNIST v2 official: Adam lr 1e-3, batch 32, lr x0.1 at 50%/75% of the epochs, "
                    "best val AUROC kept; flips, rotations and intensity jitter",
    ),
    "tuned": Protocol(
        TUNED_DEFAULTS, label_smoothing=0.1, intensity_jitter=0.0, flip_tta=True,
        description="AdamW (weight decay 0.05) lr 1e-3, batch 32, 40-step warm-up + cosine decay, gradient "
                    "clipping 1.0, label smoothing 0.1, flips and rotations (no intensity jitter: the volumes are "
                    "binary masks), 8-flip test-time averaging, best val AUROC kept",
    ),
}
DEFAULT_DATASET = "adrenalmnist3d"
DEFAULT_MANIFEST_SIZE = (64, 64, 64)
MEDMNIST_SIZES = (28, 64)
FITS = ("resize", "crop-pad")
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
BASELINE_DIR = "baseline_resnet"
VAL_CURVE_NAME = "val_auc.png"
HISTORY_KEYS = ("epoch", "val_auroc", "val_accuracy", "val_auroc_no_tta")


@dataclass(frozen=True)
class CTOptions:
    """Everything :func:`train_ct` needs. Give either ``dataset`` (a MedMNIST 3D name, found under ``data_root``;
    the default when there is no ``manifest``) or ``manifest`` (a labels CSV, see :mod:`bioattn.data.ct_manifest`).

    size: the MedMNIST edge ``(28,)`` or ``(64,)`` (default 28), or for a manifest the model input ``(X, Y, Z)`` (one
    value: a cube; default 64³; divisible by the CNN stride) that every volume is resized to (``fit="resize"``) or
    centre cropped / zero padded to (``fit="crop-pad"``). orientation (manifest default ``"RAS"``), spacing (mm)
    and window (``(low, high)`` onto [0, 1]) are the other manifest preprocessing steps. label_smoothing,
    intensity_jitter and tta (``"none"``/``"flips"``) default to the protocol's. ``train``: the full training
    configuration (default: :func:`protocol_train_config`).
    """

    out: Path
    dataset: str | None = None
    data_root: str | None = None
    manifest: Path | None = None
    size: tuple[int, ...] | None = None
    orientation: str | None = None
    spacing: tuple[float, float, float] | None = None
    window: tuple[float, float] | None = None
    fit: str = "resize"
    protocol: str = "medmnist"
    baseline: str = "resnet"
    augment: bool = True
    label_smoothing: float | None = None
    intensity_jitter: float | None = None
    tta: str | None = None
    quick: bool = False
    stem_channels: tuple[int, ...] | None = None
    stem_strides: tuple[int, ...] | None = None
    d_model: int = 96
    heads: int = 4
    layers: int = 3
    dropout: float = 0.1
    train: TrainConfig | None = None
    resume: bool = False
    overwrite: bool = False

    def __post_init__(self) -> None:
        if self.dataset is not None and self.manifest is not None:
            raise UserInputError("give either a dataset (--dataset) or your own volumes (--manifest), not both")
        if self.protocol not in PROTOCOLS:
            raise UserInputError(f"unknown protocol {self.protocol!r}; choose from {', '.join(PROTOCOLS)}")
        if self.fit not in FITS:
            raise UserInputError(f"fit must be one of {', '.join(FITS)}, got {self.fit!r}")
        if self.manifest is None:
            given = [flag for flag, value in (("--orientation", self.orientation), ("--spacing", self.spacing),
                                              ("--window", self.window)) if value is not None]
            if self.fit != "resize":
                given.append("--fit")
            if given:
                raise UserInputError(f"{', '.join(given)} apply to --manifest volumes, not to a MedMNIST dataset")
            if self.size is not None and (len(self.size) != 1 or self.size[0] not in MEDMNIST_SIZES):
                given = " ".join(map(str, self.size))
                raise UserInputError(f"--size of a MedMNIST dataset must be 28 or 64, got {given}")
        elif self.size is not None and (len(self.size) not in (1, 3) or min(self.size) < 1):
            raise UserInputError(f"--size needs 1 or 3 positive sizes (X Y Z), got {' '.join(map(str, self.size))}")

    @property
    def dataset_name(self) -> str | None:
        """The MedMNIST dataset trained on, or ``None`` for a manifest."""
        return None if self.manifest is not None else self.dataset or DEFAULT_DATASET

    @property
    def input_size(self) -> tuple[int, int, int]:
        """Spatial size of the volumes before stride padding: the MedMNIST edge cubed, or the manifest's size."""
        if self.manifest is None:
            return (self.size[0] if self.size else MEDMNIST_SIZES[0],) * 3  # type: ignore[return-value]
        if self.size is None:
            return DEFAULT_MANIFEST_SIZE
        return tuple(self.size * 3 if len(self.size) == 1 else self.size)  # type: ignore[return-value]

    def preprocessing(self) -> VolumePreprocessing:
        """The NIfTI/DICOM steps of a manifest run: orientation (RAS), spacing, window, then resize or crop/pad."""
        size = self.input_size
        return VolumePreprocessing(orientation=self.orientation or "RAS", spacing=self.spacing, window=self.window,
                                   resize=size if self.fit == "resize" else None,
                                   size=size if self.fit == "crop-pad" else None)

    def stem(self) -> tuple[list[int], list[int]]:
        """Channels and strides of the CNN stages: 4 stages (stride 16) above 32 voxels, else 3 (stride 8)."""
        stages = 4 if max(self.input_size) > 32 else 3
        channels = self.stem_channels or ([4, 8, 8, 8][:stages] if self.quick else [16, 32, 64, 96][:stages])
        strides = self.stem_strides or [2] * stages
        return list(channels), list(strides)


def resolve_protocol(options: CTOptions) -> Protocol:
    """The protocol of ``options.protocol`` with ``label_smoothing``, ``intensity_jitter`` and ``tta`` applied."""
    protocol = PROTOCOLS[options.protocol]
    if options.label_smoothing is not None and not 0.0 <= options.label_smoothing < 1.0:
        raise UserInputError(f"--label-smoothing must be in [0, 1), got {options.label_smoothing}")
    if options.intensity_jitter is not None and not 0.0 <= options.intensity_jitter < 1.0:
        raise UserInputError(f"--intensity-jitter must be in [0, 1), got {options.intensity_jitter}")
    if options.tta not in (None, "none", "flips"):
        raise UserInputError(f"--tta must be none or flips, got {options.tta!r}")
    return dataclasses.replace(
        protocol,
        label_smoothing=protocol.label_smoothing if options.label_smoothing is None else options.label_smoothing,
        intensity_jitter=protocol.intensity_jitter if options.intensity_jitter is None else options.intensity_jitter,
        flip_tta=protocol.flip_tta if options.tta is None else options.tta == "flips",
    )


def protocol_train_config(
    protocol: str, config: TrainConfig | None = None, *, quick: bool = False, keep_milestones: bool = False
) -> TrainConfig:
    """``config`` (default: the protocol's), shrunk to 2 epochs of 3 steps of 8 with ``quick``; the step-decay
    milestones move to 50 % and 75 % of ``max_epochs`` unless ``keep_milestones`` (a YAML file set them)."""
    config = config or PROTOCOLS[protocol].train
    if quick:
        config = dataclasses.replace(config, max_epochs=2, max_steps_per_epoch=3, batch_size=8)
    if not keep_milestones:
        config = dataclasses.replace(config, milestones=(config.max_epochs // 2, config.max_epochs * 3 // 4))
    return config


def build_models(
    options: CTOptions, num_classes: int, in_channels: int, class_names: list[str] | None = None
) -> tuple[HybridCT3D, nn.Module | None]:
    """The attention model and the MONAI ResNet baseline (``None`` with ``baseline="none"``); tiny with ``quick``."""
    channels, strides = options.stem()
    try:
        hybrid = HybridCT3D(
            in_channels, num_classes, stem_channels=channels, stem_strides=strides,
            d_model=24 if options.quick else options.d_model, num_heads=2 if options.quick else options.heads,
            num_layers=1 if options.quick else options.layers, dropout=options.dropout, class_names=class_names,
        )
    except ValueError as exc:
        raise UserInputError(f"invalid model options: {exc}") from exc
    if options.baseline == "none":
        return hybrid, None
    widths = [4, 8, 16, 32] if options.quick else [8, 16, 32, 64]
    baseline = ResNet("basic", [1, 1, 1, 1] if options.quick else [2, 2, 2, 2], widths, spatial_dims=3,
                      n_input_channels=in_channels, num_classes=num_classes)
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
    size = options.input_size
    if any(s % stride for s in size):
        suggestion = " ".join(str(max(stride, round(s / stride) * stride)) for s in size)
        raise UserInputError(f"--size {' '.join(map(str, size))} must be divisible by the CNN stride {stride} in every "
                             f"axis (e.g. --size {suggestion}, or other --stem-strides)")
    return load_manifest(options.manifest, options.preprocessing(), seed=config.seed)


def _scores(labels: np.ndarray, probs: np.ndarray, split: str) -> dict[str, float]:
    return with_prefix(split, classification_metrics(labels, probs))


def train_one(
    name: str, model: nn.Module, run_dir: Path, data: CTData, config: TrainConfig, protocol: Protocol, *,
    augment: bool = True, resume: bool = False, run_info: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Train ``model`` with the shared Trainer (best ``val_auroc`` kept); return its metrics (rank 0; ``{}`` elsewhere).

    Validation numbers use the protocol's evaluation (flip averaging under ``tuned``); ``val_auroc_no_tta`` is the
    same weights without it, ``val_auroc_last_epoch`` the final weights; ``test_*`` when ``data`` has a test split.
    """
    augmentation = train_augmentation(intensity_jitter=protocol.intensity_jitter) if augment else None
    train_set = data.augmented(augmentation) if augmentation is not None else data.splits["train"]
    val_set, val_labels = data.splits["val"], data.labels["val"]

    def loss_fn(module: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        images, labels = batch
        return F.cross_entropy(module(images), labels, label_smoothing=protocol.label_smoothing)

    def evaluate(module: nn.Module) -> dict[str, float]:
        probs = predict_probabilities(module, val_set, batch_size=config.batch_size, flip_tta=protocol.flip_tta)
        metrics = _scores(val_labels, probs, "val")
        if protocol.flip_tta:  # the same weights without test-time averaging, for comparison
            plain = predict_probabilities(module, val_set, batch_size=config.batch_size)
            metrics["val_auroc_no_tta"] = _scores(val_labels, plain, "val")["val_auroc"]
        return metrics

    print(f"[{name}] {count_parameters(model) / 1e6:.2f} M parameters, training in {run_dir}", file=sys.stderr)
    trainer = Trainer(model, train_set, config, run_dir, loss_fn=loss_fn, evaluate=evaluate, resume=resume,
                      run_info=run_info)
    result, info = fit_timed(trainer)
    if not is_main_process():
        return {}
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
    record = {f.name: getattr(options, f.name) for f in dataclasses.fields(options) if f.name != "train"}
    return {k: str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v for k, v in record.items()}


def train_ct(options: CTOptions) -> dict[str, Any]:
    """Train the attention model (and the baseline) as ``options`` say; return what ``metrics.json`` holds."""
    protocol = resolve_protocol(options)
    config = options.train or protocol_train_config(options.protocol, quick=options.quick)
    stride = int(np.prod(options.stem()[1]))
    data = _load_data(options, config, stride)
    seed_everything(config.seed)
    class_names = _class_names(options, data)
    hybrid, baseline = build_models(options, max(data.num_classes, 2), data.in_channels, class_names)
    run_dir = prepare_run_dir(options.out, resume=options.resume, overwrite=options.overwrite)
    print(f"{data.path}: " + ", ".join(f"{s} {n}" for s, n in data.split_sizes.items()), file=sys.stderr)
    if data.source == "manifest" and is_main_process():
        write_split_table(run_dir / "splits.csv", data)

    # what actually ran: the file read (data root resolved) and the model built (--quick sizes applied)
    run_info = {**_options_record(options), "data_file": str(data.path.resolve()), "model": hybrid.config}
    common = dict(augment=options.augment, resume=options.resume, run_info=run_info)
    results = {HYBRID_NAME: train_one("hybrid", hybrid, run_dir, data, config, protocol, **common)}
    if baseline is not None:
        results[BASELINE_NAME] = train_one("baseline", baseline, run_dir / BASELINE_DIR, data, config, protocol,
                                           **common)
    if not is_main_process():
        return {}
    hybrid.save_pretrained(run_dir)
    SavedPreprocessing(source=data.source, preprocessing=data.preprocessing or VolumePreprocessing(),
                       flip_tta=protocol.flip_tta, profile=data.training_profile()).save(run_dir)
    if baseline is not None:
        save_tensors(run_dir / BASELINE_DIR / "model.safetensors", baseline.state_dict())
    plot_metric_per_epoch(
        {f"{name} ({m['parameters'] / 1e6:.2f} M)":
         [(h["epoch"], h["val_auroc"]) for h in m["val_history"] if h.get("val_auroc") is not None]
         for name, m in results.items()},
        run_dir / VAL_CURVE_NAME, ylabel="validation AUROC",
    )
    dataset = options.dataset_name
    metrics = {
        "dataset": dataset,
        "manifest": str(data.path) if data.source == "manifest" else None,
        "size": list(options.input_size),
        "file": str(data.path),
        "class_names": hybrid.class_names,
        "split_sizes": data.split_sizes,
        "test_split_present": "test" in data.splits,
        "preprocessing": data.preprocessing.to_dict() if data.preprocessing else None,
        "protocol": {"name": options.protocol, "description": PROTOCOLS[options.protocol].description,
                     "label_smoothing": protocol.label_smoothing, "intensity_jitter": protocol.intensity_jitter,
                     "flip_tta": protocol.flip_tta, "augment": options.augment, "train": config.to_dict()},
        "models": results,
        "published_test_auroc_accuracy": {k: {"auroc": a, "accuracy": c}
                                          for k, (a, c) in PUBLISHED.get(dataset or "", {}).items()},
    }
    write_json(run_dir / "metrics.json", metrics)
    print(comparison_table(dataset, results))
    if "test" not in data.splits:
        print("note: no test split; this run's numbers are validation numbers"
              + (", the published ones are test numbers (compare with care)" if dataset in PUBLISHED else ""))
    print(f"wrote {run_dir / 'metrics.json'}")
    return metrics
