"""The training data of a CT run: a MedMNIST 3D ``.npz`` or your own NIfTI/DICOM manifest, as one :class:`CTData`.

:func:`load_medmnist` serves the ``.npz`` splits zero-padded to a multiple of the model's stride (exactly as the
recipe always did); :func:`load_manifest` reads a manifest (:mod:`bioattn.data.ct_manifest`), splits it and caches
every volume after the :class:`~bioattn.data.ct.VolumePreprocessing` steps. Both give the model-ready volumes
without augmentation, a way to serve the training split through a random augmentation, and the profile of the
training volumes saved with the model (:mod:`bioattn.tasks.ct.preprocessing`).
"""
from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from monai.data import get_track_meta, set_track_meta
from monai.transforms import Compose, DivisiblePad
from torch.utils.data import Dataset

from bioattn.data.ct import (
    VolumeDataset,
    read_ct_volume,
    VolumePreprocessing,
    VolumeSplit,
    load_medmnist3d_npz,
    medmnist_npz_path,
)
from bioattn.data.ct_manifest import (
    ManifestRow,
    ManifestVolumes,
    read_manifest,
    split_rows,
)
from bioattn.errors import UserInputError
from bioattn.io import write_table
from bioattn.metrics import order_binary_classes
from bioattn.progress import progress_bar
from bioattn.tasks.ct.preprocessing import profile_volumes, volume_statistics

__all__ = [
    "SOFT_TISSUE_WINDOW",
    "CTData",
    "WithoutMetadata",
    "looks_like_hounsfield",
    "hounsfield_window",
    "load_manifest",
    "load_medmnist",
    "pad_split",
    "write_split_table",
]

#: The window (Hounsfield units, onto [0, 1]) of manifest runs whose volumes are CT in HU and that give no --intensity-window:
#: the usual abdominal soft-tissue window (level 40, width 400), so that a lesion 100 HU above soft tissue is a
#: quarter of the input range instead of a tenth of air-to-tissue contrast.
SOFT_TISSUE_WINDOW = (-160.0, 240.0)
#: Training volumes looked at (evenly over the training rows) to decide whether a manifest holds HU.
HOUNSFIELD_SAMPLE = 8

Transform = Callable[[torch.Tensor], torch.Tensor]


@dataclass
class LabelledVolumes:
    """One split as the Task hooks see it: ``volumes`` serving ``(image (C, X, Y, Z), label)``, their integer
    ``labels (N,)``, whether predictions average the 8 flips (``flip_tta``) and whether the volumes are binary
    masks (``binary``: the depth baseline applies)."""

    volumes: Dataset
    labels: np.ndarray
    flip_tta: bool = True
    binary: bool = False

    def __len__(self) -> int:
        return len(self.labels)

    def join(self, other: "LabelledVolumes") -> "LabelledVolumes":
        """This split followed by ``other`` (a cross-validation pool)."""
        from torch.utils.data import ConcatDataset

        return LabelledVolumes(ConcatDataset([self.volumes, other.volumes]),
                               np.concatenate([self.labels, other.labels]), self.flip_tta, self.binary)


@dataclass
class CTData:
    """Model-ready volumes of one run.

    source: ``"medmnist"`` or ``"manifest"``; path: the ``.npz`` or the manifest; splits: ``{split: dataset}`` of
    ``(image (C, X, Y, Z) float32, label int64)`` without augmentation (``train``, ``val``, optionally ``test``);
    labels: ``{split: (N,) int64}``; class_names: from the manifest, ``None`` for MedMNIST (the task names them);
    augmented: ``augmented(transform)`` serves the training split through ``transform``; preprocessing: the
    NIfTI/DICOM steps (manifest only); rows: the manifest rows of each split (manifest only).
    """

    source: str
    path: Path
    splits: dict[str, Dataset]
    labels: dict[str, np.ndarray]
    class_names: list[str] | None
    in_channels: int
    augmented: Callable[[Transform], Dataset]
    preprocessing: VolumePreprocessing | None = None
    rows: dict[str, list[ManifestRow]] | None = None

    @property
    def num_classes(self) -> int:
        return len(self.class_names) if self.class_names else int(max(v.max() for v in self.labels.values())) + 1

    @property
    def split_sizes(self) -> dict[str, int]:
        return {name: len(labels) for name, labels in self.labels.items()}

    def training_profile(self) -> dict[str, Any]:
        """:func:`~bioattn.tasks.ct.preprocessing.profile_volumes` of the training split (no file is read again)."""
        train = self.splits["train"]
        statistics = [volume_statistics(train[i][0]) for i in
                      progress_bar(range(len(train)), desc="training volume statistics", leave=False)]
        geometries = [train.record(i)["geometry"] for i in range(len(train))] if self.source == "manifest" else None
        return profile_volumes(statistics, geometries)


def load_medmnist(data_root: str | os.PathLike, dataset: str, size: int, *, divisible_by: int) -> CTData:
    """A MedMNIST 3D file's splits (train and val required, test when present), zero-padded to ``divisible_by``."""
    path = medmnist_npz_path(data_root, dataset, size)
    splits = load_medmnist3d_npz(path)
    for required in ("train", "val"):
        if required not in splits:
            raise UserInputError(f"{path}: needs a {required} split (has {', '.join(splits)})")
    channel_counts = {split.num_channels for split in splits.values()}
    if len(channel_counts) != 1:
        raise UserInputError(f"{path}: splits have different channel counts {sorted(channel_counts)}")
    padded = {name: pad_split(split, divisible_by) for name, split in splits.items()}
    return CTData(
        source="medmnist", path=path,
        splits={name: VolumeDataset(split) for name, split in padded.items()},
        labels={name: split.labels for name, split in splits.items()},
        class_names=None, in_channels=channel_counts.pop(),
        augmented=lambda augment: VolumeDataset(padded["train"], WithoutMetadata([augment])),
    )


class WithoutMetadata(Compose):
    """A MONAI ``Compose`` that runs its transforms with MONAI's metadata tracking off: the same voxels (and, from
    the same seed, the same random draws as ``Compose([pad, *transforms])``), about a third faster on a 32³ volume,
    where the affine bookkeeping of every flip and rotation costs as much as the resampling."""

    def __call__(self, input_: Any, *args: Any, **kwargs: Any) -> Any:
        tracking = get_track_meta()
        set_track_meta(False)
        try:
            return super().__call__(input_, *args, **kwargs)
        finally:
            set_track_meta(tracking)


def pad_split(split: VolumeSplit, divisible_by: int) -> VolumeSplit:
    """``split`` with every volume zero-padded once by MONAI's ``DivisiblePad(k=divisible_by)`` (its dtype kept).

    The same voxels as padding each served volume, without paying for the padding at every epoch:
    ``(N, C, D, H, W)`` is padded as one ``(N * C, D, H, W)`` stack (the pad depends only on the spatial shape).
    """
    images = split.images
    stacked = images.reshape(-1, *images.shape[2:])
    padded = np.asarray(DivisiblePad(k=divisible_by)(stacked))
    return dataclasses.replace(split, images=padded.reshape(*images.shape[:2], *padded.shape[1:]))


def looks_like_hounsfield(volume: torch.Tensor) -> bool:
    """Whether a raw volume ``(C, X, Y, Z)`` looks like CT in Hounsfield units: air (at least 1 % of the voxels at
    or below -500), soft tissue (at least 1 % between -200 and 300), nothing above 40,000 (12-bit CT tops out near
    3,000; scanners' extended scales near 30,000), and more than two distinct values (not a mask)."""
    flat = volume.detach().reshape(-1).float()
    sample = flat[:: max(1, flat.numel() // 2**16)]
    air = float((sample <= -500).float().mean())
    tissue = float(((sample >= -200) & (sample <= 300)).float().mean())
    return air >= 0.01 and tissue >= 0.01 and float(flat.max()) <= 40000 and torch.unique(sample).numel() > 2


def hounsfield_window(manifest_path: str | os.PathLike, *, seed: int) -> tuple[float, float] | None:
    """:data:`SOFT_TISSUE_WINDOW` when every one of up to :data:`HOUNSFIELD_SAMPLE` training volumes of the manifest
    (the split :func:`load_manifest` makes with ``seed``) :func:`looks_like_hounsfield`, else ``None`` (intensities
    stay as they are). Reads those files once more, before caching."""
    manifest = read_manifest(manifest_path, require_labels=True)
    rows = split_rows(manifest, seed=seed)[0]["train"]
    picked = [rows[i] for i in np.unique(np.linspace(0, len(rows) - 1, min(HOUNSFIELD_SAMPLE, len(rows))).astype(int))]
    for row in picked:
        try:
            volume = read_ct_volume(row.image)
        except UserInputError as exc:
            raise UserInputError(f"{manifest.where(row)}: {exc}") from exc
        if not looks_like_hounsfield(volume):
            return None
    return SOFT_TISSUE_WINDOW


def load_manifest(manifest_path: str | os.PathLike, preprocessing: VolumePreprocessing, *, seed: int,
                  positive_class: str | None = None) -> CTData:
    """Read, split (:func:`~bioattn.data.ct_manifest.split_rows`) and cache the manifest's volumes.

    Every volume must come out of ``preprocessing`` with the same shape and channel count. With two labels the
    positive class is class 1 (``positive_class``, else :func:`~bioattn.metrics.order_binary_classes`' rule: the
    label that is not ``normal``, ``control``, ...), said on stderr.
    """
    manifest = read_manifest(manifest_path, require_labels=True)
    rows, class_names = split_rows(manifest, seed=seed)
    try:
        class_names, reason = order_binary_classes(class_names, positive_class)
    except UserInputError as exc:
        raise UserInputError(f"{manifest.path}: {exc}") from None
    if reason:
        print(f"{manifest.path}: {reason}", file=sys.stderr)
    class_index = {name: index for index, name in enumerate(class_names)}
    print(f"{manifest.path}: {len(class_names)} classes ({', '.join(class_names)}); "
          + ", ".join(f"{split} {len(r)}" for split, r in rows.items()) + "; reading and caching the volumes",
          file=sys.stderr)
    splits = {split: ManifestVolumes(manifest, split_rows_, preprocessing, class_index=class_index)
              for split, split_rows_ in rows.items()}
    shapes = {}
    for split, volumes in splits.items():
        for index, row in enumerate(volumes.rows):
            shapes.setdefault(tuple(volumes.record(index)["image"].shape), manifest.where(row))
    if len(shapes) > 1:
        (first, where_first), (other, where_other) = list(shapes.items())[:2]
        raise UserInputError(
            f"{where_other}: the volume is {other} (channels, X, Y, Z) after preprocessing but {where_first} is "
            f"{first}; give --size so that every volume is resized (or cropped/padded) to one shape, and use one "
            "channel count"
        )
    train = splits["train"]
    return CTData(
        source="manifest", path=manifest.path, splits=splits,
        labels={split: volumes.labels for split, volumes in splits.items()},
        class_names=class_names, in_channels=int(next(iter(shapes))[0]),
        augmented=train.with_transform, preprocessing=preprocessing, rows=rows,
    )


def write_split_table(path: str | os.PathLike, data: CTData) -> None:
    """``splits.csv``: every manifest volume with its line, label and the split it was used in (itself a manifest)."""
    assert data.rows is not None
    write_table(path, ["image", "label", "split", "manifest_line"],
                ([os.path.abspath(row.image), row.label, split, row.line]
                 for split, rows in data.rows.items() for row in rows))
