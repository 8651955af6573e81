"""CT volumes for the hybrid CNN + attention model: MedMNIST 3D ``.npz``, NIfTI and DICOM.

- :func:`load_medmnist3d_npz` reads MedMNIST v2 3D files: the official ones (``train``/``val``/``test``
  arrays) as well as files that carry only some of the splits. Images become ``(N, C, D, H, W)``.
- :class:`VolumeDataset` serves ``(image (C, D, H, W) float32 in [0, 1], label)`` pairs with an optional
  MONAI transform such as :func:`train_augmentation` (flips, small rotations, intensity jitter).
- :func:`read_ct_volume` reads a NIfTI file, a DICOM file or a DICOM series folder with MONAI's readers
  (nibabel, pydicom; :class:`LoadVolumed` is the same loader as a dictionary transform) into a
  channel-first ``MetaTensor (C, X, Y, Z)`` that keeps the affine; :class:`VolumePreprocessing` describes
  the MONAI steps (orientation, spacing, HU window, resize, crop/pad) as array transforms (invertible:
  :func:`invert_to_input_grid` maps a model output back onto the input's grid) or as the identical
  dictionary transforms for cached training data (:func:`ct_preprocessing` is the array shortcut).
- :func:`write_nifti` writes a volume atomically with a given affine (and a NIfTI input's sform / qform codes).

Every problem with a file is a :class:`~bioattn.errors.UserInputError` naming the file: unreadable,
NaN/inf voxels, a 2D image where a 3D volume is needed, no voxels, the wrong channel count, missing keys.
"""
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


# --------------------------------------------------------------------------- MedMNIST 3D .npz


@dataclass(frozen=True)
class VolumeSplit:
    """One split of a volume classification file.

    images: ``(N, C, D, H, W)`` as stored (``uint8`` images are scaled by 1/255 when served);
    labels: ``(N,)`` int64 class indices.
    """

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
    """Find ``dataset``'s MedMNIST 3D file under ``data_root/ct/<dataset>/`` or ``data_root/``.

    Tries the official names (``adrenalmnist3d.npz``, ``adrenalmnist3d_64.npz``) and the train/val-only
    copies (``adrenalmnist3d_trainval.npz``, ``adrenalmnist3d_64_trainval.npz``).
    """
    stem = dataset if size == 28 else f"{dataset}_{size}"
    names = [f"{stem}.npz", f"{stem}_trainval.npz"]
    folders = [Path(data_root) / "ct" / dataset, Path(data_root)]
    candidates = [folder / name for folder in folders for name in names]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise UserInputError(
        f"no {dataset} file at size {size} under {data_root} (tried {', '.join(str(c) for c in candidates)})"
    )


def load_medmnist3d_npz(path: str | os.PathLike) -> dict[str, VolumeSplit]:
    """Read the splits of a MedMNIST 3D file: ``{split: VolumeSplit}`` for each of train/val/test present.

    A split is present when the file has both ``<split>_images`` and ``<split>_labels``. Images may be
    ``(N, D, H, W)`` (MedMNIST layout, one channel) or ``(N, C, D, H, W)``; labels ``(N,)`` or ``(N, 1)``.
    """
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
        raise UserInputError(
            f"{path}: no MedMNIST arrays found (expected train_images/train_labels, val_images/val_labels "
            f"and/or test_images/test_labels; the file has {sorted(arrays) or 'no arrays'})"
        )
    return splits


def _split_from_arrays(path: Path, split: str, images: np.ndarray, labels: np.ndarray) -> VolumeSplit:
    where = f"{path} [{split}_images]"
    if images.ndim == 3:
        raise UserInputError(
            f"{where}: 2D images of shape {images.shape} (N, H, W) where 3D volumes (N, D, H, W) are expected"
        )
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
        raise UserInputError(
            f"{path} [{split}_labels]: expected one class per volume, shape (N,) or (N, 1), got {labels.shape}"
        )
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
    """MONAI training augmentation for one ``(C, D, H, W)`` volume in [0, 1].

    A flip along each spatial axis with ``flip_prob``; with ``rotate_prob`` a rotation of up to
    ``rotate_degrees`` about each axis (one trilinear resampling, zero padding); intensity scaled by a factor in
    ``[1 - j, 1 + j]`` and shifted by ``[-j, j]`` (``j = intensity_jitter``), each with probability 0.5;
    ``intensity_jitter=0`` leaves intensities alone (e.g. for binary shape masks such as AdrenalMNIST3D).
    """
    radians = float(np.deg2rad(rotate_degrees))
    steps = [*(RandFlip(prob=flip_prob, spatial_axis=axis) for axis in range(3)),
             RandRotate(range_x=radians, range_y=radians, range_z=radians, prob=rotate_prob, padding_mode="zeros")]
    if intensity_jitter > 0:
        steps += [RandScaleIntensity(factors=intensity_jitter, prob=0.5),
                  RandShiftIntensity(offsets=intensity_jitter, prob=0.5)]
    return Compose(steps)


@torch.no_grad()
def foreground_distance(volumes: torch.Tensor, threshold: float = 0.5) -> torch.Tensor:
    """How deep each voxel lies inside a mask: ``(B, C, D, H, W)`` → ``(B, 1, D, H, W)``, same dtype and device.

    Channel 0 above ``threshold`` is the foreground (a binary mask, or a resampled one whose edges lie between 0
    and 1); each foreground voxel gets its city-block (taxicab) distance in voxels to the nearest background voxel
    (1 on the surface; voxels outside the volume count as background), background voxels 0. Its mean over the
    mask says how thick the structure is: on AdrenalMNIST3D that one number alone separates the classes with
    out-of-fold AUROC 0.849. Computed with ``scipy.ndimage.distance_transform_cdt`` on the CPU (about 2 ms for a
    64³ volume), without gradient.
    """
    if volumes.dim() != 5:
        raise ValueError(f"expected volumes (B, C, D, H, W), got shape {tuple(volumes.shape)}")
    masks = np.pad((volumes[:, 0] > threshold).cpu().numpy(), [(0, 0)] + [(1, 1)] * 3)  # outside = background
    depth = np.stack([ndimage.distance_transform_cdt(mask, metric="taxicab")[1:-1, 1:-1, 1:-1] for mask in masks])
    return torch.from_numpy(depth[:, None]).to(device=volumes.device, dtype=volumes.dtype)


class VolumeDataset(Dataset):
    """Serves ``(image (C, D, H, W) float32, label int64)``; ``uint8`` voxels are scaled to [0, 1].

    ``transform`` is a MONAI transform of one volume (e.g. padding, :func:`train_augmentation`). A random
    transform is re-seeded from torch's global RNG for every item, so augmentation follows
    ``torch.manual_seed`` (and a resumed run's restored RNG state) in the main process and in workers.
    """

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
    """``transform(image)`` as a plain float32 tensor; a random MONAI transform is first re-seeded from torch's
    global RNG, so augmentation follows ``torch.manual_seed`` (and a resumed run's restored RNG state)."""
    if isinstance(transform, Randomizable):
        transform.set_random_state(seed=int(torch.randint(0, 2**31 - 1, ())))
    return convert_to_tensor(transform(image), track_meta=False, dtype=torch.float32)


# --------------------------------------------------------------------------- NIfTI / DICOM


def _is_nifti(path: Path) -> bool:
    return path.name.lower().endswith(NIFTI_SUFFIXES)


def volume_reader(path: str | os.PathLike) -> tuple[ImageReader, str]:
    """The MONAI reader for ``path`` and the name of its format: ``(NibabelReader(), "NIfTI")`` for
    ``.nii``/``.nii.gz``, ``(PydicomReader(), "DICOM")`` for a DICOM file or series folder.

    Raises :class:`UserInputError` when ``path`` does not exist or is neither.
    """
    path = Path(path)
    if not path.exists():
        raise UserInputError(f"{path}: file not found")
    if _is_nifti(path):
        return NibabelReader(), "NIfTI"
    if path.is_dir() or path.suffix.lower() in (".dcm", ".dicom", "") or _has_dicom_preamble(path):
        return PydicomReader(), "DICOM"
    raise UserInputError(
        f"{path}: unsupported file type; expected a NIfTI file (.nii, .nii.gz), a DICOM file or a DICOM folder"
    )


@contextlib.contextmanager
def _quiet_reader_registration() -> Iterator[None]:
    """MONAI's loaders register every reader they know; the GPU DICOM decoder's warns when there is no GPU."""
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
    """:class:`monai.transforms.LoadImaged` for NIfTI files and DICOM files or series folders.

    Picks the reader with :func:`volume_reader` (nibabel or pydicom), returns float32 ``MetaTensor`` images
    with their affine, and turns any failure into a :class:`UserInputError` that starts with ``data[where_key]``
    (e.g. ``"labels.csv, line 7"``) when the dictionary has it. ``keys`` name the path entries.
    """

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
    """Read a NIfTI file, a DICOM file or a folder holding one DICOM series.

    Returns a channel-first ``MetaTensor (C, X, Y, Z)`` float32 whose ``affine`` maps voxels to RAS
    millimetres (nibabel for NIfTI; pydicom through MONAI's ``PydicomReader`` for DICOM, with the
    rescale slope/intercept applied, i.e. Hounsfield units for CT). The same loader as the training
    pipeline (:class:`LoadVolumed` then channel first). Raises :class:`UserInputError` naming the file
    when it cannot be read or is not a finite 3D volume (see :func:`check_volume`).
    """
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
    """Check a channel-first volume ``(C, X, Y, Z)``: 3D, non-empty, finite, ``in_channels`` channels.

    A single slice (one spatial axis of length 1, e.g. a lone DICOM file) counts as 2D.
    """
    shape = tuple(volume.shape)
    if volume.numel() == 0:
        raise UserInputError(f"{source}: holds no voxels (shape {shape})")
    spatial = shape[1:]
    extent = [size for size in spatial if size > 1]
    if len(spatial) != 3 or len(extent) != 3:
        raise UserInputError(
            f"{source}: a {len(extent)}D image ({'x'.join(map(str, extent))}) where a 3D volume is required "
            "(for DICOM, pass the folder that holds the whole series)"
        )
    if in_channels is not None and shape[0] != in_channels:
        raise UserInputError(f"{source}: has {shape[0]} channel(s), the model expects {in_channels}")
    finite = torch.isfinite(volume)
    if not bool(finite.all()):
        count = int((~finite).sum())
        raise UserInputError(f"{source}: {count} voxel{'s are' if count > 1 else ' is'} NaN or infinite")


def world_geometry(volume: MetaTensor) -> dict[str, list[float]]:
    """Voxel size and field of view of a channel-first ``MetaTensor (C, X, Y, Z)`` along the world axes.

    Each voxel axis is assigned the world axis (R, A, S) its affine column points along most, so the
    numbers do not depend on how the file orders its axes. Returns ``{"spacing": [mm R, A, S],
    "extent": [mm R, A, S], "shape": [voxels R, A, S]}`` (extent = voxels x spacing).
    """
    affine = np.asarray(volume.affine, dtype=np.float64)[:3, :3]
    shape = np.asarray(volume.shape[1:], dtype=np.float64)
    spacing = np.linalg.norm(affine, axis=0)
    order = np.argsort(np.argmax(np.abs(affine), axis=0), kind="stable")
    return {"spacing": [round(float(v), 4) for v in spacing[order]],
            "extent": [round(float(v), 4) for v in (spacing * shape)[order]], "shape": [int(v) for v in shape[order]]}


def write_nifti(path: str | os.PathLike, volume: np.ndarray | torch.Tensor, affine: np.ndarray | torch.Tensor,
                like: Mapping[str, Any] | None = None) -> None:
    """Write ``volume (X, Y, Z)`` float32 with ``affine (4, 4)`` as NIfTI, atomically (``.nii`` or ``.nii.gz``).

    ``like``: the metadata of the NIfTI volume the map lies on (``MetaTensor.meta`` of :func:`read_ct_volume`); the
    file then keeps that input's sform and qform codes and its qform, so a viewer puts both in the same space (without
    it, or for a DICOM or ``.npz`` input: nibabel's sform code 2, "aligned", and no qform).
    """
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


#: The NIfTI header fields of a qform (besides its code), kept by :func:`write_nifti` from its ``like``.
_QFORM_FIELDS = ("quatern_b", "quatern_c", "quatern_d", "qoffset_x", "qoffset_y", "qoffset_z", "pixdim")
