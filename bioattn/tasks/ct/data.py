"""The training data of a CT run (MedMNIST 3D ``.npz`` or NIfTI/DICOM manifest) as one :class:`CTData`."""
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
    VolumeDataset, read_ct_volume, VolumePreprocessing, VolumeSplit, load_medmnist3d_npz, medmnist_npz_path,
)
from bioattn.data.ct_manifest import ManifestRow, ManifestVolumes, read_manifest, split_rows
from bioattn.errors import UserInputError
from bioattn.io import write_table
from bioattn.metrics import order_binary_classes
from bioattn.progress import progress_bar
from bioattn.tasks.ct.preprocessing import profile_volumes, volume_statistics

__all__ = [
    "SOFT_TISSUE_WINDOW", "CTData", "WithoutMetadata", "looks_like_hounsfield", "hounsfield_window", "load_manifest",
    "load_medmnist", "pad_split", "write_split_table",
]

#: The soft-tissue window (HU onto [0, 1]) of manifest runs in Hounsfield units without --intensity-window.
SOFT_TISSUE_WINDOW = (-160.0, 240.0)
#: Training volumes looked at to decide whether a manifest holds HU.
HOUNSFIELD_SAMPLE = 8

Transform = Callable[[torch.Tensor], torch.Tensor]


@dataclass
class LabelledVolumes:
    """One split as the Task hooks see it: ``(image (C, X, Y, Z), label)`` ``volumes`` and their ``labels (N,)``."""
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
    """Model-ready ``(image (C, X, Y, Z), label)`` splits of one run; ``augmented(transform)``: the training split."""
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
        """:func:`~bioattn.tasks.ct.preprocessing.profile_volumes` of the training split."""
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
    return CTData(source="medmnist", path=path, splits={name: VolumeDataset(split) for name, split in padded.items()},
                  labels={name: split.labels for name, split in splits.items()}, class_names=None,
                  in_channels=channel_counts.pop(),
                  augmented=lambda augment: VolumeDataset(padded["train"], WithoutMetadata([augment])))


class WithoutMetadata(Compose):
    """A MONAI ``Compose`` that runs its transforms with metadata tracking off (the same voxels and random draws)."""

    def __call__(self, input_: Any, *args: Any, **kwargs: Any) -> Any:
        tracking = get_track_meta()
        set_track_meta(False)
        try:
            return super().__call__(input_, *args, **kwargs)
        finally:
            set_track_meta(tracking)


def pad_split(split: VolumeSplit, divisible_by: int) -> VolumeSplit:
    """``split`` with every volume zero-padded once by MONAI's ``DivisiblePad(k=divisible_by)`` (its dtype kept)."""
    images = split.images
    stacked = images.reshape(-1, *images.shape[2:])
    padded = np.asarray(DivisiblePad(k=divisible_by)(stacked))
    return dataclasses.replace(split, images=padded.reshape(*images.shape[:2], *padded.shape[1:]))


def looks_like_hounsfield(volume: torch.Tensor) -> bool:
    """Whether a raw volume ``(C, X, Y, Z)`` looks like CT in Hounsfield units (air, soft tissue, not a mask)."""
    flat = volume.detach().reshape(-1).float()
    sample = flat[:: max(1, flat.numel() // 2**16)]
    air = float((sample <= -500).float().mean())
    tissue = float(((sample >= -200) & (sample <= 300)).float().mean())
    return air >= 0.01 and tissue >= 0.01 and float(flat.max()) <= 40000 and torch.unique(sample).numel() > 2


def hounsfield_window(manifest_path: str | os.PathLike, *, seed: int) -> tuple[float, float] | None:
    """:data:`SOFT_TISSUE_WINDOW` when sampled training volumes all :func:`looks_like_hounsfield`, else ``None``."""
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
    """Read, split and cache the manifest's volumes; with two labels ``positive_class`` is class 1."""
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
            "channel count")
    return CTData(source="manifest", path=manifest.path, splits=splits,
                  labels={split: volumes.labels for split, volumes in splits.items()}, class_names=class_names,
                  in_channels=int(next(iter(shapes))[0]), augmented=splits["train"].with_transform,
                  preprocessing=preprocessing, rows=rows)


def write_split_table(path: str | os.PathLike, data: CTData) -> None:
    """``splits.csv``: every manifest volume with its label, split and manifest line."""
    assert data.rows is not None
    write_table(path, ["image", "label", "split", "manifest_line"],
                ([os.path.abspath(row.image), row.label, split, row.line]
                 for split, rows in data.rows.items() for row in rows))
