"""Your own labelled CT volumes: a CSV manifest (``image``, ``label``, optional ``split``), read once and cached."""
from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
from monai.data import CacheDataset
from monai.data import Dataset as MonaiDataset
from monai.transforms import Compose, EnsureChannelFirstd, MapTransform
from torch.utils.data import Dataset

from bioattn.data.ct import (LoadVolumed, VolumePreprocessing, apply_random_transform, check_volume, volume_reader,
                             world_geometry)
from bioattn.errors import UserInputError

__all__ = ["SPLITS", "ManifestRow", "Manifest", "read_manifest", "is_manifest", "class_names_of", "split_rows",
           "CheckVolumed", "ManifestVolumes"]
SPLITS = ("train", "val", "test")
UNKNOWN_LABEL = -1


@dataclass(frozen=True)
class ManifestRow:
    """One volume of a manifest: its CSV line (header = 1), resolved image path, label text (or ``None``) and split."""
    line: int
    image: Path
    label: str | None
    split: str | None


@dataclass(frozen=True)
class Manifest:
    """A checked manifest: its path, its rows in file order, and whether it has a split column."""
    path: Path
    rows: tuple[ManifestRow, ...]
    has_split: bool

    def where(self, row: ManifestRow) -> str:
        """``"labels.csv, line 7"``: how errors and warnings name a row."""
        return f"{self.path}, line {row.line}"


def is_manifest(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a manifest (a ``.csv`` file) rather than an image."""
    return Path(path).suffix.lower() == ".csv"


def read_manifest(path: str | os.PathLike, *, require_labels: bool) -> Manifest:
    """Read and check a manifest (no image is read yet); ``require_labels``: labels required, each image listed once."""
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            records = [(reader.line_num, record) for record in reader if any(cell.strip() for cell in record)]
    except FileNotFoundError:
        raise UserInputError(f"{path}: manifest not found") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UserInputError(f"{path}: cannot read the manifest as CSV ({exc})") from exc
    if header is None:
        raise UserInputError(f"{path}: empty manifest; expected a header line with the columns image,label[,split]")
    columns = [name.strip().lower() for name in header]
    required = ("image", "label") if require_labels else ("image",)
    for name in required:
        if name not in columns:
            raise UserInputError(f"{path}, line 1: missing column {name!r} (the header has "
                                 f"{', '.join(columns) or 'nothing'}); expected image,label[,split]")
    if not records:
        raise UserInputError(f"{path}: lists no volumes (only a header line)")
    folder = path.parent
    rows, seen = [], {}
    for line, record in records:
        if len(record) > len(columns):
            raise UserInputError(f"{path}, line {line}: {len(record)} fields but the header has {len(columns)}")
        values = dict(zip(columns, (cell.strip() for cell in record)))
        row = _row(path, line, values, folder, require_labels)
        if require_labels and row.image in seen:
            raise UserInputError(f"{path}, line {line}: {row.image} is already listed on line {seen[row.image]}")
        seen[row.image] = line
        rows.append(row)
    return Manifest(path=path, rows=tuple(rows), has_split="split" in columns)


def _row(path: Path, line: int, values: Mapping[str, str], folder: Path, require_labels: bool) -> ManifestRow:
    where = f"{path}, line {line}"
    image = values.get("image", "")
    if not image:
        raise UserInputError(f"{where}: empty image path")
    image_path = Path(image) if Path(image).is_absolute() else folder / image
    try:
        volume_reader(image_path)  # exists and is a NIfTI file or DICOM file/folder
    except UserInputError as exc:
        raise UserInputError(f"{where}: {exc}") from None
    label = values.get("label")
    if require_labels and not label:
        raise UserInputError(f"{where}: empty label")
    split = values.get("split")
    if split is not None:
        split = split.lower()
        if split not in SPLITS:
            raise UserInputError(f"{where}: unknown split {values['split']!r} (expected train, val or test)")
    return ManifestRow(line=line, image=image_path, label=label or None, split=split)


def class_names_of(labels: Sequence[str]) -> list[str]:
    """The distinct labels sorted, numerically when every label is a whole number (``2 < 10``)."""
    distinct = set(labels)
    try:
        return sorted(distinct, key=int)
    except ValueError:
        return sorted(distinct)


def split_rows(manifest: Manifest, *, seed: int,
               val_fraction: float = 0.2) -> tuple[dict[str, list[ManifestRow]], list[str]]:
    """Training rows by split (a stratified ``val_fraction`` held out without ``val`` rows), and the class names."""
    path = manifest.path
    rows = list(manifest.rows)
    class_names = class_names_of([row.label for row in rows])
    if len(class_names) < 2:
        raise UserInputError(f"{path}: all {len(rows)} volumes (lines {rows[0].line}-{rows[-1].line}) have the label "
                             f"{class_names[0]!r}; training needs at least 2 classes")
    splits = {name: [row for row in rows if (row.split or "train") == name] for name in SPLITS}
    if not splits["val"]:
        splits["train"], splits["val"] = _stratified_holdout(path, splits["train"], class_names, seed, val_fraction)
    for split, description in (("train", "training"), ("val", "validation")):
        present = {row.label for row in splits[split]}
        for name in class_names:
            if name not in present:
                raise UserInputError(f"{path}: the {description} split has no volume of class {name!r}; every class "
                                     f"needs {description} volumes (give it {split} rows, or leave out the split "
                                     "column for an automatic stratified validation split)")
    return {name: split for name, split in splits.items() if split}, class_names


def _stratified_holdout(path: Path, rows: list[ManifestRow], class_names: list[str], seed: int,
                        fraction: float) -> tuple[list[ManifestRow], list[ManifestRow]]:
    """``(train, val)``: ``round(fraction * n)`` rows of each class (at least 1, at most n - 1) to val; file order."""
    rng = np.random.default_rng(seed)
    held_out: set[int] = set()
    for name in class_names:
        members = [i for i, row in enumerate(rows) if row.label == name]
        if len(members) < 2:
            raise UserInputError(f"{path}: class {name!r} has {len(members)} training volume(s); holding out a "
                                 "stratified validation split needs at least 2 per class (or give val rows in a split "
                                 "column)")
        count = min(max(1, round(fraction * len(members))), len(members) - 1)
        held_out.update(int(i) for i in rng.permutation(members)[:count])
    return ([row for i, row in enumerate(rows) if i not in held_out],
            [row for i, row in enumerate(rows) if i in held_out])


class CheckVolumed(MapTransform):
    """Check each ``keys`` volume (:func:`~bioattn.data.ct.check_volume`), store its ``"geometry"`` (pre-resampling)."""

    def __call__(self, data: Mapping[str, Any]) -> dict[str, Any]:
        result = dict(data)
        for key in self.key_iterator(result):
            source = f"{result['where']}: {result['path']}" if "where" in result else str(result.get("path", key))
            check_volume(result[key], source)
            result["geometry"] = world_geometry(result[key])
        return result


def _user_error(exc: BaseException) -> UserInputError | None:
    """The :class:`UserInputError` behind MONAI's ``RuntimeError("applying transform ...")`` wrappers, if any."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, UserInputError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


class ManifestVolumes(Dataset):
    """``(image (C, X, Y, Z) float32, label int64)`` for manifest rows (``-1``: no known label), cached by MONAI."""

    def __init__(self, manifest: Manifest, rows: Sequence[ManifestRow], preprocessing: VolumePreprocessing, *,
                 class_index: Mapping[str, int], divisible_by: int = 1, cache: bool = True,
                 transform: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        self.manifest = manifest
        self.rows = list(rows)
        self.transform = transform
        self.labels = np.array([class_index.get(row.label, UNKNOWN_LABEL) for row in self.rows], dtype=np.int64)
        records = [{"image": str(row.image), "path": str(row.image), "where": manifest.where(row)} for row in self.rows]
        steps = Compose([LoadVolumed("image"), EnsureChannelFirstd("image"), CheckVolumed("image"),
                         *preprocessing.dict_pipeline("image", divisible_by=divisible_by)])
        try:
            self.volumes = (CacheDataset(records, steps, cache_rate=1.0, num_workers=min(4, os.cpu_count() or 1),
                                         copy_cache=False) if cache else MonaiDataset(records, steps))
        except Exception as exc:
            raise _user_error(exc) or exc

    def __len__(self) -> int:
        return len(self.rows)

    def record(self, index: int) -> dict[str, Any]:
        """The preprocessed record: ``image`` (``MetaTensor (C, X, Y, Z)``), ``geometry``, ``where`` and ``path``."""
        try:
            return self.volumes[index]
        except Exception as exc:
            raise _user_error(exc) or exc

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        image = self.record(index)["image"].as_tensor()  # plain tensor: augmentation never touches the cache's metadata
        if self.transform is not None:
            image = apply_random_transform(self.transform, image)
        return image.float(), torch.tensor(self.labels[index])

    def with_transform(self, transform: Callable[[torch.Tensor], torch.Tensor] | None) -> ManifestVolumes:
        """The same (cached) volumes served through ``transform``; nothing is read again."""
        clone = object.__new__(ManifestVolumes)
        clone.__dict__.update(self.__dict__, transform=transform)
        return clone
