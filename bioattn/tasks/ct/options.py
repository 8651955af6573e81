"""The CT task's options (:class:`CTOptions`), protocols (:data:`PROTOCOLS`) and shared names and numbers."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

from bioattn.data.ct import VolumePreprocessing
from bioattn.errors import UserInputError
from bioattn.models.hybrid_ct import POOLS, STEMS, resnet_stem_problem
from bioattn.tasks.common import Recipe, TaskOptions, recipe_for
from bioattn.tasks.ct.preprocessing import FITS
from bioattn.training import TrainConfig
from bioattn.training.mixup import check_mixup_alpha

__all__ = [
    "MEDMNIST_DEFAULTS", "TUNED_DEFAULTS", "PROTOCOLS", "PUBLISHED", "DEFAULT_DATASET", "DEFAULT_MANIFEST_SIZE",
    "DEFAULT_STEM_DEPTH", "HYBRID_NAME", "BASELINE_NAME", "DEPTH_BASELINE_NAME", "Protocol", "CTOptions",
    "resolve_protocol", "protocol_train_config",
]

#: Small training sets under the tuned protocol: at least this many batches per epoch and optimizer steps.
SMALL_DATA_MIN_BATCHES = 4
SMALL_DATA_MIN_STEPS = 400
MEDMNIST_DEFAULTS = TrainConfig(
    max_epochs=100, batch_size=32, lr=1e-3, optimizer="adam", weight_decay=0.0, schedule="multistep",
    milestones=(50, 75), gamma=0.1, grad_clip=None, monitor="val_auroc", monitor_mode="max",
)
TUNED_DEFAULTS = TrainConfig(
    max_epochs=15, batch_size=32, lr=1e-3, optimizer="adamw", weight_decay=0.05, schedule="warmup_cosine",
    warmup_steps=40, grad_clip=1.0, monitor="val_auroc", monitor_mode="max",
    min_steps=SMALL_DATA_MIN_STEPS, min_batches_per_epoch=SMALL_DATA_MIN_BATCHES,
)


@dataclass(frozen=True, kw_only=True)
class Protocol(Recipe):
    """A CT training :class:`~bioattn.tasks.common.Recipe`: ``train_config`` plus loss, augmentation and evaluation."""
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
DEFAULT_MEDMNIST_SIZE = 64
DEFAULT_STEM_DEPTH = 4
DEFAULT_MANIFEST_POOL = "cls+mean"
DEFAULT_MANIFEST_STEM = "resnet"
#: How the attention model starts (:attr:`CTOptions.init_name`).
INITS = ("resnet", "scratch")
#: The same-run ResNet baseline's stage widths and basic blocks per stage (and with ``quick``).
BASELINE_WIDTHS, BASELINE_BLOCKS = (8, 16, 32, 64), 2
QUICK_BASELINE_WIDTHS, QUICK_BASELINE_BLOCKS = (4, 8, 16, 32), 1
#: The flags that shape the attention model's own CNN and readout (given: the default init is "scratch").
ARCHITECTURE_FLAGS = {"stem_channels": "--stem-channels", "stem_strides": "--stem-strides", "stem_type": "--stem",
                      "pool": "--pool", "unshuffle": "--unshuffle"}
#: Largest edge the CNN stem sees by default (bigger volumes are unshuffled).
STEM_EDGE = 32
CLASS_NAMES = {"adrenalmnist3d": ("normal", "hyperplasia")}
# MedMNIST v2 (Yang et al., Sci. Data 2023), official test split: (AUROC, accuracy).
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
OOF_PREFIXES = {HYBRID_NAME: "", BASELINE_NAME: "baseline_", DEPTH_BASELINE_NAME: "depth_"}
BASELINE_DIR = "baseline_resnet"
HYBRID_DIR = "hybrid_attention"
VAL_CURVE_NAME = "val_auc.png"
HISTORY_KEYS = ("epoch", "val_auroc", "val_accuracy", "val_auroc_no_tta")


@dataclass(frozen=True)
class CTOptions(TaskOptions):
    """Everything ``bioattn train ct`` needs: ``dataset`` (MedMNIST 3D) or ``manifest``; ``None``: the default."""
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
    stem_type: str | None = None
    init: str | None = None
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
                                              ("--intensity-window", self.window),
                                              ("--fit", self.fit != "resize" or None),
                                              ("--positive-class", self.positive_class)) if value is not None]
            if given:
                raise UserInputError(f"{', '.join(given)} apply to --manifest volumes, not to a MedMNIST dataset")
            if self.size is not None and (len(self.size) != 1 or self.size[0] not in MEDMNIST_SIZES):
                given = " ".join(map(str, self.size))
                raise UserInputError(f"--size of a MedMNIST dataset must be 28 or 64, got {given}")
        elif self.size is not None and (len(self.size) not in (1, 3) or min(self.size) < 1):
            raise UserInputError(f"--size needs 1 or 3 positive sizes (X Y Z), got {' '.join(map(str, self.size))}")
        self._check_stem()

    def _check_stem(self) -> None:
        """Check the model flags and a manifest ``--size`` before any volume is read."""
        channels, strides = self.stem()
        if len(channels) != len(strides):
            raise UserInputError(f"--stem-channels and --stem-strides need one value per CNN stage, got "
                                 f"{' '.join(map(str, channels))} and {' '.join(map(str, strides))}")
        if min(*channels, *strides) < 1:
            raise UserInputError("--stem-channels and --stem-strides must be positive")
        if self.init is not None and self.init not in INITS:
            raise UserInputError(f"--init must be one of {', '.join(INITS)}, got {self.init!r}")
        if self.init == "resnet":
            given = [flag for name, flag in ARCHITECTURE_FLAGS.items() if getattr(self, name) is not None]
            if self.baseline == "none":
                raise UserInputError("--init resnet starts the attention model from the same-run ResNet: it needs "
                                     "--baseline resnet")
            if given:
                raise UserInputError(f"--init resnet builds the attention model on the same-run ResNet's trunk and "
                                     f"readout, so {', '.join(given)} cannot be set; use --init scratch for a CNN of "
                                     "your own")
        if self.pool is not None and self.pool not in POOLS:
            raise UserInputError(f"--pool must be one of {', '.join(POOLS)}, got {self.pool!r}")
        if self.stem_type is not None and self.stem_type not in STEMS:
            raise UserInputError(f"--stem must be one of {', '.join(STEMS)}, got {self.stem_type!r}")
        if self.stem_name == "resnet" and (problem := resnet_stem_problem(strides)):
            raise UserInputError(f"--stem resnet: {problem}, got --stem-strides {' '.join(map(str, strides))}")
        if self.manifest is None:
            return
        size, stride = self.input_size, self.stride
        bad = [f"{axis} = {n}" for axis, n in zip("XYZ", size) if n % stride]
        if bad:
            suggestion = " ".join(str(max(stride, round(n / stride) * stride)) for n in size)
            raise UserInputError(
                f"--size {' '.join(map(str, size))}: each of X, Y and Z must be a multiple of the CNN stride {stride} "
                f"({', '.join(bad)} {'is' if len(bad) == 1 else 'are'} not); e.g. --size {suggestion} (the stride is --unshuffle times the product of "
                "--stem-strides, and without the last of them when the model starts from the ResNet: 16 by default above 32 "
                "voxels, 8 up to 32)")

    @property
    def dataset_name(self) -> str | None:
        """The MedMNIST dataset, or ``None`` for a manifest."""
        return None if self.manifest is not None else self.dataset or DEFAULT_DATASET

    @property
    def input_size(self) -> tuple[int, int, int]:
        """Spatial size of the volumes before stride padding."""
        if self.manifest is None:
            return (self.size[0] if self.size else DEFAULT_MEDMNIST_SIZE,) * 3  # type: ignore[return-value]
        if self.size is None:
            return DEFAULT_MANIFEST_SIZE
        return tuple(self.size * 3 if len(self.size) == 1 else self.size)  # type: ignore[return-value]

    def preprocessing(self) -> VolumePreprocessing:
        """The NIfTI/DICOM steps of a manifest run."""
        size = self.input_size
        return VolumePreprocessing(orientation=self.orientation or "RAS", spacing=self.spacing, window=self.window,
                                   resize=size if self.fit == "resize" else None,
                                   size=size if self.fit == "crop-pad" else None)

    def unshuffle_factor(self) -> int:
        """``unshuffle``, by default 2 above :data:`STEM_EDGE` voxels, else 1."""
        if self.unshuffle is not None:
            return self.unshuffle
        return 2 if max(self.input_size) > STEM_EDGE else 1

    def stem(self) -> tuple[list[int], list[int]]:
        """Channels and strides of the CNN stages: 4 when the stem sees more than :data:`STEM_EDGE` voxels, else 3."""
        if self.init_name == "resnet":
            return list(QUICK_BASELINE_WIDTHS if self.quick else BASELINE_WIDTHS), [2, 2, 2, 2]
        stages = 4 if max(self.input_size) > STEM_EDGE * self.unshuffle_factor() else 3
        default = [16, 32, 64, 96] if stages == 4 else [8, 16, 32] if self.stem_name == "resnet" else [8, 16, 64]
        channels = self.stem_channels or ([4, 8, 8, 8][:stages] if self.quick else default)
        strides = self.stem_strides or [2] * stages
        return list(channels), list(strides)

    @property
    def pool_name(self) -> str:
        """What the classifier reads (:data:`~bioattn.models.hybrid_ct.POOLS`): ``pool``, else the default."""
        if self.pool is not None:
            return self.pool
        if self.init_name == "resnet":
            return "trunk+gate"
        return DEFAULT_MANIFEST_POOL if self.manifest is not None else "cls"

    @property
    def stem_name(self) -> str:
        """The CNN stem (:data:`~bioattn.models.hybrid_ct.STEMS`): ``stem_type``, else the default."""
        if self.stem_type is not None:
            return self.stem_type
        if self.init_name == "resnet":
            return "resnet"
        return DEFAULT_MANIFEST_STEM if self.manifest is not None else "residual"

    @property
    def stride(self) -> int:
        """The token grid's downsampling; volumes are padded to a multiple of it."""
        strides = self.stem()[1]
        return self.unshuffle_factor() * math.prod(strides[:-1] if self.init_name == "resnet" else strides)

    @property
    def init_name(self) -> str:
        """How the attention model starts (:data:`INITS`): ``init``, else ``resnet`` for a manifest run with the ResNet
        baseline and none of :data:`ARCHITECTURE_FLAGS`, else ``scratch``."""
        if self.init is not None:
            return self.init
        explicit = any(getattr(self, name) is not None for name in ARCHITECTURE_FLAGS)
        return "resnet" if self.manifest is not None and self.baseline == "resnet" and not explicit else "scratch"


def resolve_protocol(options: CTOptions) -> Protocol:
    """The protocol of ``options.protocol`` with the options' loss, augmentation and evaluation overrides."""
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


def protocol_train_config(protocol: str, config: TrainConfig | None = None, *, quick: bool = False,
                          keep_milestones: bool = False) -> TrainConfig:
    """``config`` (default: the protocol's), tiny with ``quick``, milestones at 50 %/75 % unless ``keep_milestones``."""
    config = config or recipe_for(PROTOCOLS, protocol, flag="--protocol").train_config
    if quick:
        config = dataclasses.replace(config, max_epochs=2, max_steps_per_epoch=3, batch_size=8, min_steps=0,
                                     min_batches_per_epoch=0)
    if not keep_milestones:
        config = dataclasses.replace(config, milestones=(config.max_epochs // 2, config.max_epochs * 3 // 4))
    return config
