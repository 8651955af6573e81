"""CT volumes for the hybrid CNN + attention model: MedMNIST 3D ``.npz``, NIfTI and DICOM."""
from __future__ import annotations

import contextlib
import gzip
import logging
import os
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import nibabel as nib
import numpy as np
import torch
from monai.data import ImageReader, MetaTensor, NibabelReader, PydicomReader
from monai.transforms import (Compose, EnsureChannelFirstd, LoadImaged, Randomizable, RandFlip, RandRotate,
                              RandScaleIntensity, RandShiftIntensity)
from monai.utils import convert_to_tensor
from scipy import ndimage
from torch.utils.data import Dataset

from bioattn.errors import UserInputError
from bioattn.data.ct_preprocessing import (PREPROCESSING_NAME, SavedPreprocessing, VolumePreprocessing,
                                           ct_preprocessing, invert_to_input_grid)
from bioattn.io import atomic_write

__all__ = ["MEDMNIST_SPLITS", "VolumeSplit", "medmnist_npz_path", "load_medmnist3d_npz", "VolumeDataset",
           "train_augmentation", "apply_random_transform", "foreground_distance", "volume_reader", "LoadVolumed",
           "read_ct_volume", "check_volume", "world_geometry", "PREPROCESSING_NAME", "SavedPreprocessing",
           "VolumePreprocessing", "ct_preprocessing", "invert_to_input_grid", "write_nifti"]
MEDMNIST_SPLITS = ("train", "val", "test")
NIFTI_SUFFIXES = (".nii", ".nii.gz")


@dataclass(frozen=True)
class VolumeSplit:
    """One split of a volume classification file: ``images (N, C, D, H, W)`` as stored, ``labels (N,)`` int64."""
    images: np.ndarray
    labels: np.ndarray
    source: str

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def num_channels(self) -> int:
        return int(self.images.shape[1])

    @property
    def spatial_shape(self) -> tuple[int, int, int]:
        return tuple(int(s) for s in self.images.shape[2:])  # type: ignore[return-value]


def medmnist_npz_path(data_root: str | os.PathLike, dataset: str, size: int = 28) -> Path:
    """``dataset``'s MedMNIST 3D file under ``data_root/ct/<dataset>/`` or ``data_root/``."""
    stem = dataset if size == 28 else f"{dataset}_{size}"
    names = [f"{stem}.npz", f"{stem}_trainval.npz"]
    folders = [Path(data_root) / "ct" / dataset, Path(data_root)]
    candidates = [folder / name for folder in folders for name in names]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise UserInputError(f"no {dataset} file at size {size} under {data_root} (tried "
                         f"{', '.join(str(c) for c in candidates)})")


def load_medmnist3d_npz(path: str | os.PathLike) -> dict[str, VolumeSplit]:
    """``{split: VolumeSplit}`` of a MedMNIST 3D file; images ``(N, [C,] D, H, W)``, labels ``(N,)`` or ``(N, 1)``."""
    path = Path(path)
    if not path.is_file():
        raise UserInputError(f"{path}: file not found")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise UserInputError(f"{path}: not a readable .npz file ({exc})") from exc
    splits: dict[str, VolumeSplit] = {}
    for split in MEDMNIST_SPLITS:
        image_key, label_key = f"{split}_images", f"{split}_labels"
        if image_key not in arrays and label_key not in arrays:
            continue
        if image_key not in arrays or label_key not in arrays:
            present, missing = (image_key, label_key) if image_key in arrays else (label_key, image_key)
            raise UserInputError(f"{path}: has {present} but no {missing}")
        splits[split] = _split_from_arrays(path, split, arrays[image_key], arrays[label_key])
    if not splits:
        raise UserInputError(f"{path}: no MedMNIST arrays found (expected train_images/train_labels, "
                             "val_images/val_labels and/or test_images/test_labels; the file has "
                             f"{sorted(arrays) or 'no arrays'})")
    return splits


def _split_from_arrays(path: Path, split: str, images: np.ndarray, labels: np.ndarray) -> VolumeSplit:
    where = f"{path} [{split}_images]"
    if images.ndim == 3:
        raise UserInputError(f"{where}: 2D images of shape {images.shape} (N, H, W) where 3D volumes "
                             "(N, D, H, W) are expected")
    if images.ndim == 4:
        images = images[:, None]
    if images.ndim != 5:
        raise UserInputError(f"{where}: expected (N, D, H, W) or (N, C, D, H, W) volumes, got shape {images.shape}")
    if images.shape[0] == 0 or min(images.shape[1:]) == 0:
        raise UserInputError(f"{where}: holds no voxels (shape {images.shape})")
    if not (np.issubdtype(images.dtype, np.number) or images.dtype == np.bool_):
        raise UserInputError(f"{where}: voxels must be numbers, got dtype {images.dtype}")
    if np.issubdtype(images.dtype, np.floating):
        bad = ~np.isfinite(images).reshape(len(images), -1).all(axis=1)
        if bad.any():
            raise UserInputError(f"{where}: volume {int(np.argmax(bad))} has NaN or infinite voxels")
    labels = np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1:
        raise UserInputError(f"{path} [{split}_labels]: expected one class per volume, shape (N,) or (N, 1), got "
                             f"{labels.shape}")
    if len(labels) != len(images):
        raise UserInputError(f"{path}: {split} has {len(images)} images but {len(labels)} labels")
    integral = np.issubdtype(labels.dtype, np.integer) or (
        np.issubdtype(labels.dtype, np.floating) and np.isfinite(labels).all() and (labels == np.round(labels)).all()
    )
    if not integral or (labels < 0).any():
        raise UserInputError(f"{path} [{split}_labels]: labels must be non-negative whole numbers (class indices)")
    return VolumeSplit(images=images, labels=labels.astype(np.int64), source=f"{path} [{split}]")


def train_augmentation(*, flip_prob: float = 0.5, rotate_degrees: float = 15.0, rotate_prob: float = 0.5,
                       intensity_jitter: float = 0.1) -> Compose:
    """MONAI training augmentation of one ``(C, D, H, W)`` volume in [0, 1]: flips, rotations, intensity jitter."""
    radians = float(np.deg2rad(rotate_degrees))
    steps = [*(RandFlip(prob=flip_prob, spatial_axis=axis) for axis in range(3)),
             RandRotate(range_x=radians, range_y=radians, range_z=radians, prob=rotate_prob, padding_mode="zeros")]
    if intensity_jitter > 0:
        steps += [RandScaleIntensity(factors=intensity_jitter, prob=0.5),
                  RandShiftIntensity(offsets=intensity_jitter, prob=0.5)]
    return Compose(steps)


@torch.no_grad()
def foreground_distance(volumes: torch.Tensor, threshold: float = 0.5) -> torch.Tensor:
    """``(B, C, D, H, W)`` → ``(B, 1, D, H, W)``: taxicab depth of each voxel of channel 0 > ``threshold``."""
    if volumes.dim() != 5:
        raise ValueError(f"expected volumes (B, C, D, H, W), got shape {tuple(volumes.shape)}")
    masks = np.pad((volumes[:, 0] > threshold).cpu().numpy(), [(0, 0)] + [(1, 1)] * 3)  # outside = background
    depth = np.stack([ndimage.distance_transform_cdt(mask, metric="taxicab")[1:-1, 1:-1, 1:-1] for mask in masks])
    return torch.from_numpy(depth[:, None]).to(device=volumes.device, dtype=volumes.dtype)


class VolumeDataset(Dataset):
    """``(image (C, D, H, W) float32, label int64)`` items; ``uint8`` voxels scaled to [0, 1]."""

    def __init__(self, split: VolumeSplit, transform: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        self.split = split
        self.transform = transform
        self.scale = 1.0 / 255.0 if split.images.dtype == np.uint8 else 1.0

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        image = torch.from_numpy(np.asarray(self.split.images[index], dtype=np.float32)) * self.scale
        if self.transform is not None:
            image = apply_random_transform(self.transform, image)
        return image, torch.tensor(self.split.labels[index])


def apply_random_transform(transform: Callable[[torch.Tensor], torch.Tensor], image: torch.Tensor) -> torch.Tensor:
    """``transform(image)`` as a float32 tensor; a random MONAI transform is first re-seeded from torch's global RNG."""
    if isinstance(transform, Randomizable):
        transform.set_random_state(seed=int(torch.randint(0, 2**31 - 1, ())))
    return convert_to_tensor(transform(image), track_meta=False, dtype=torch.float32)


def _is_nifti(path: Path) -> bool:
    return path.name.lower().endswith(NIFTI_SUFFIXES)


def volume_reader(path: str | os.PathLike) -> tuple[ImageReader, str]:
    """``(NibabelReader(), "NIfTI")`` or ``(PydicomReader(), "DICOM")`` for ``path``, else a :class:`UserInputError`."""
    path = Path(path)
    if not path.exists():
        raise UserInputError(f"{path}: file not found")
    if _is_nifti(path):
        return NibabelReader(), "NIfTI"
    if path.is_dir() or path.suffix.lower() in (".dcm", ".dicom", "") or _has_dicom_preamble(path):
        return PydicomReader(), "DICOM"
    raise UserInputError(f"{path}: unsupported file type; expected a NIfTI file (.nii, .nii.gz), a DICOM file or a "
                         "DICOM folder")


@contextlib.contextmanager
def _quiet_reader_registration() -> Iterator[None]:
    """Silence the GPU DICOM decoder's warning when MONAI registers its readers without a GPU."""
    logger = logging.getLogger("monai.data.nvimgcodec_pydicom_plugin")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="NvImgCodecPydicomReader")
            yield
    finally:
        logger.setLevel(level)


class LoadVolumed(LoadImaged):
    """:class:`monai.transforms.LoadImaged` for NIfTI and DICOM; errors are prefixed with ``data[where_key]``."""

    def __init__(self, keys: str | Sequence[str], *, where_key: str = "where") -> None:
        with _quiet_reader_registration():
            super().__init__(keys, image_only=True, dtype=np.float32)
        self.where_key = where_key

    def __call__(self, data: dict, reader: ImageReader | None = None) -> dict:
        result = dict(data)
        for key in self.key_iterator(result):
            path = Path(result[key])
            prefix = f"{result[self.where_key]}: " if self.where_key in result else ""
            try:
                reader, kind = volume_reader(path)
            except UserInputError as exc:
                raise UserInputError(f"{prefix}{exc}") from exc
            try:
                result[key] = self._loader(str(path), reader)
            except Exception as exc:  # nibabel/pydicom raise many unrelated types for corrupt files
                reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise UserInputError(f"{prefix}{path}: cannot read as {kind} ({reason})") from exc
        return result


def read_ct_volume(path: str | os.PathLike) -> MetaTensor:
    """A NIfTI file, DICOM file or DICOM series folder → checked ``MetaTensor (C, X, Y, Z)`` float32 with RAS affine."""
    volume = EnsureChannelFirstd("image")(LoadVolumed("image")({"image": path}))["image"]
    check_volume(volume, path)
    return volume


def _has_dicom_preamble(path: Path) -> bool:
    if not path.is_file():
        return False
    with open(path, "rb") as handle:
        handle.seek(128)
        return handle.read(4) == b"DICM"


def check_volume(volume: torch.Tensor, source: str | os.PathLike, *, in_channels: int | None = None) -> None:
    """Check a channel-first volume ``(C, X, Y, Z)``: 3D (a single slice counts as 2D), non-empty, finite, channels."""
    shape = tuple(volume.shape)
    if volume.numel() == 0:
        raise UserInputError(f"{source}: holds no voxels (shape {shape})")
    spatial = shape[1:]
    extent = [size for size in spatial if size > 1]
    if len(spatial) != 3 or len(extent) != 3:
        raise UserInputError(f"{source}: a {len(extent)}D image ({'x'.join(map(str, extent))}) where a 3D volume is "
                             "required (for DICOM, pass the folder that holds the whole series)")
    if in_channels is not None and shape[0] != in_channels:
        raise UserInputError(f"{source}: has {shape[0]} channel(s), the model expects {in_channels}")
    finite = torch.isfinite(volume)
    if not bool(finite.all()):
        count = int((~finite).sum())
        raise UserInputError(f"{source}: {count} voxel{'s are' if count > 1 else ' is'} NaN or infinite")


def world_geometry(volume: MetaTensor) -> dict[str, list[float]]:
    """``{"spacing", "extent", "shape"}`` of a ``MetaTensor (C, X, Y, Z)`` along the world axes R, A, S."""
    affine = np.asarray(volume.affine, dtype=np.float64)[:3, :3]
    shape = np.asarray(volume.shape[1:], dtype=np.float64)
    spacing = np.linalg.norm(affine, axis=0)
    order = np.argsort(np.argmax(np.abs(affine), axis=0), kind="stable")
    return {"spacing": [round(float(v), 4) for v in spacing[order]],
            "extent": [round(float(v), 4) for v in (spacing * shape)[order]], "shape": [int(v) for v in shape[order]]}


def write_nifti(path: str | os.PathLike, volume: np.ndarray | torch.Tensor, affine: np.ndarray | torch.Tensor,
                like: Mapping[str, Any] | None = None) -> None:
    """Write ``volume (X, Y, Z)`` with ``affine (4, 4)`` as NIfTI, keeping ``like``'s (input meta) sform / qform."""
    path = Path(path)
    if not _is_nifti(path):
        raise UserInputError(f"{path}: output must end in .nii or .nii.gz")
    array = np.asarray(torch.as_tensor(volume).detach().cpu(), dtype=np.float32)
    matrix = np.asarray(torch.as_tensor(affine).cpu(), dtype=np.float64)
    image = nib.Nifti1Image(array, matrix)
    if like is not None and "sform_code" in like and "qform_code" in like:
        source = nib.Nifti1Header()  # the input's own qform: its quaternion, offsets and voxel sizes
        for key in ("sform_code", "qform_code", *_QFORM_FIELDS):
            if key in like:
                source[key] = np.asarray(like[key])
        qform_code = int(source["qform_code"])
        image.set_sform(matrix, code=int(source["sform_code"]))
        image.set_qform(source.get_qform() if qform_code else None, code=qform_code)
    image.header.set_xyzt_units("mm")
    payload = image.to_bytes()
    if path.name.lower().endswith(".gz"):
        payload = gzip.compress(payload, compresslevel=6)
    with atomic_write(path, "wb") as handle:
        handle.write(payload)


_QFORM_FIELDS = ("quatern_b", "quatern_c", "quatern_d", "qoffset_x", "qoffset_y", "qoffset_z", "pixdim")
