"""CT data layer: MedMNIST 3D npz, NIfTI/DICOM reading with MONAI, preprocessing and its inverse."""
from __future__ import annotations

import os
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import torch
from monai.data import MetaTensor

from bioattn.data.ct import (
    VolumeDataset,
    check_volume,
    ct_preprocessing,
    foreground_distance,
    invert_to_input_grid,
    load_medmnist3d_npz,
    medmnist_npz_path,
    read_ct_volume,
    train_augmentation,
    write_nifti,
)
from bioattn.errors import UserInputError

# A non-trivial affine: anisotropic spacing, x flipped, an offset.
AFFINE = np.array([[-2.0, 0, 0, 40.0], [0, 1.5, 0, -12.0], [0, 0, 3.0, 7.5], [0, 0, 0, 1]])


def _npz(path: Path, splits=("train", "val"), n: int = 6, shape=(8, 8, 8), **extra) -> Path:
    rng = np.random.default_rng(0)
    arrays = {}
    for split in splits:
        arrays[f"{split}_images"] = (rng.random((n, *shape)) > 0.5).astype(np.uint8) * 255
        arrays[f"{split}_labels"] = (np.arange(n) % 2).reshape(n, 1).astype(np.uint8)
    arrays.update(extra)
    np.savez(path, **arrays)
    return path


# ------------------------------------------------------------------------------------------ npz


def test_npz_with_only_train_val_and_official_with_test(tmp_path: Path) -> None:
    shared_style = load_medmnist3d_npz(_npz(tmp_path / "trainval.npz"))
    assert sorted(shared_style) == ["train", "val"]
    official = load_medmnist3d_npz(_npz(tmp_path / "official.npz", splits=("train", "val", "test")))
    assert sorted(official) == ["test", "train", "val"]
    split = official["test"]
    assert split.images.shape == (6, 1, 8, 8, 8) and split.num_channels == 1 and split.spatial_shape == (8, 8, 8)
    assert split.labels.tolist() == [0, 1, 0, 1, 0, 1] and split.labels.dtype == np.int64
    float_labels = tmp_path / "float_labels.npz"
    np.savez(float_labels, val_images=np.zeros((2, 4, 4, 4), np.uint8), val_labels=np.array([[1.0], [0.0]]))
    assert load_medmnist3d_npz(float_labels)["val"].labels.tolist() == [1, 0]


def test_npz_path_prefers_official_names_and_explains_misses(tmp_path: Path) -> None:
    folder = tmp_path / "ct" / "adrenalmnist3d"
    folder.mkdir(parents=True)
    _npz(folder / "adrenalmnist3d_64_trainval.npz")
    assert medmnist_npz_path(tmp_path, "adrenalmnist3d", 64).name == "adrenalmnist3d_64_trainval.npz"
    _npz(folder / "adrenalmnist3d_64.npz")
    assert medmnist_npz_path(tmp_path, "adrenalmnist3d", 64).name == "adrenalmnist3d_64.npz"
    with pytest.raises(UserInputError, match="no adrenalmnist3d file at size 28"):
        medmnist_npz_path(tmp_path, "adrenalmnist3d", 28)


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"x": np.zeros(3)}, r"no MedMNIST arrays found .*\['x'\]"),
        ({"train_images": np.zeros((2, 4, 4, 4), np.uint8)}, "has train_images but no train_labels"),
        ({"train_images": np.zeros((2, 4, 4), np.uint8), "train_labels": np.zeros((2, 1))},
         r"2D images of shape \(2, 4, 4\)"),
        ({"train_images": np.full((2, 4, 4, 4), np.nan, np.float32), "train_labels": np.zeros((2, 1), np.int64)},
         "volume 0 has NaN"),
        ({"train_images": np.zeros((2, 4, 4, 4), np.uint8), "train_labels": np.zeros((3, 1), np.int64)},
         "2 images but 3 labels"),
        ({"train_images": np.zeros((2, 4, 4, 4), np.uint8), "train_labels": np.zeros((2, 3), np.int64)},
         "one class per volume"),
        ({"train_images": np.zeros((0, 4, 4, 4), np.uint8), "train_labels": np.zeros((0, 1), np.int64)},
         "holds no voxels"),
        ({"train_images": np.zeros((2, 4, 4, 4), np.uint8), "train_labels": np.array([[0.5], [1.0]])},
         "labels must be non-negative whole numbers"),
    ],
)
def test_bad_npz_is_a_clear_error_naming_the_file(tmp_path: Path, arrays: dict, message: str) -> None:
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(UserInputError, match=message) as info:
        load_medmnist3d_npz(path)
    assert str(path) in str(info.value)


def test_unreadable_npz(tmp_path: Path) -> None:
    path = tmp_path / "garbage.npz"
    path.write_bytes(b"this is not a zip archive")
    with pytest.raises(UserInputError, match="not a readable .npz"):
        load_medmnist3d_npz(path)


def test_dataset_scales_uint8_and_augmentation_follows_the_torch_seed(tmp_path: Path) -> None:
    split = load_medmnist3d_npz(_npz(tmp_path / "d.npz"))["train"]
    plain = VolumeDataset(split)
    image, label = plain[1]
    assert image.shape == (1, 8, 8, 8) and image.dtype == torch.float32
    assert set(image.unique().tolist()) <= {0.0, 1.0} and label.item() == 1
    augmented = VolumeDataset(split, train_augmentation(flip_prob=0.5, rotate_prob=1.0))
    torch.manual_seed(3)
    first = augmented[1][0]
    torch.manual_seed(3)
    again = augmented[1][0]
    torch.manual_seed(4)
    other = augmented[1][0]
    assert type(first) is torch.Tensor and first.shape == image.shape
    assert torch.equal(first, again) and not torch.equal(first, other)
    assert not torch.equal(first, image)  # a rotation always happens with rotate_prob=1


def test_no_intensity_jitter_keeps_binary_masks_binary(tmp_path: Path) -> None:
    split = load_medmnist3d_npz(_npz(tmp_path / "d.npz"))["train"]
    image = VolumeDataset(split)[1][0]
    flips_only = VolumeDataset(split, train_augmentation(flip_prob=0.5, rotate_prob=0.0, intensity_jitter=0.0))
    jittered = VolumeDataset(split, train_augmentation(flip_prob=0.5, rotate_prob=0.0, intensity_jitter=0.1))
    torch.manual_seed(0)
    outputs = [flips_only[1][0] for _ in range(8)]
    assert all(set(out.unique().tolist()) <= {0.0, 1.0} and out.sum() == image.sum() for out in outputs)
    torch.manual_seed(0)
    assert any(not set(jittered[1][0].unique().tolist()) <= {0.0, 1.0} for _ in range(8))


# ------------------------------------------------------------------------- preprocessing


def test_crop_pad_and_divisible_pad_and_their_inverse() -> None:
    volume = MetaTensor(torch.arange(1 * 10 * 7 * 5, dtype=torch.float32).reshape(1, 10, 7, 5), affine=torch.eye(4))
    fixed = ct_preprocessing(spatial_size=(8, 9, 5))(volume)
    assert fixed.shape == (1, 8, 9, 5)
    assert torch.equal(fixed[0, :, 1:8, :], volume[0, 1:9, :, :])  # centre crop in x, zero pad in y
    assert fixed[0, :, 0].abs().sum() == 0 and fixed[0, :, 8].abs().sum() == 0
    pipeline = ct_preprocessing(divisible_by=4)
    padded = pipeline(volume)
    assert padded.shape == (1, 12, 8, 8)
    restored = pipeline.inverse(padded)
    assert restored.shape == volume.shape and torch.equal(restored.as_tensor(), volume.as_tensor())


def test_hu_window_maps_onto_unit_interval_and_clips() -> None:
    hu = MetaTensor(torch.tensor([-2000.0, -160.0, 40.0, 240.0, 3000.0]).reshape(1, 5, 1, 1), affine=torch.eye(4))
    scaled = ct_preprocessing(window=(-160, 240))(hu)
    assert torch.allclose(scaled.flatten(), torch.tensor([0.0, 0.0, 0.5, 1.0, 1.0]))
    with pytest.raises(UserInputError, match="high > low"):
        ct_preprocessing(window=(100, 100))


def test_spacing_and_orientation_are_undone_on_the_input_grid(tmp_path: Path) -> None:
    """A blob at a known voxel, resampled and reoriented, maps back to the same voxel and affine."""
    data = np.zeros((20, 16, 12), np.float32)
    data[14:17, 4:7, 8:11] = 1000.0  # blob centred at voxel (15, 5, 9)
    path = tmp_path / "blob.nii.gz"
    write_nifti(path, data, AFFINE)
    volume = read_ct_volume(path)
    pipeline = ct_preprocessing(orientation="RAS", spacing=(2.5, 2.5, 2.5), window=(0, 1000), divisible_by=4)
    image = pipeline(volume)
    assert image.shape[1:] != volume.shape[1:] and all(s % 4 == 0 for s in image.shape[1:])
    restored = invert_to_input_grid(pipeline, image, image.as_tensor())
    assert restored.shape == volume.shape
    assert np.allclose(restored.affine.numpy(), AFFINE)
    peak = np.unravel_index(int(restored[0].argmax()), restored.shape[1:])
    assert np.abs(np.array(peak) - (15, 5, 9)).max() <= 1


# --------------------------------------------------------------------------- NIfTI / DICOM


def test_nifti_round_trip_keeps_affine_and_voxels(tmp_path: Path) -> None:
    data = np.random.default_rng(1).normal(size=(6, 5, 4)).astype(np.float32)
    path = tmp_path / "scan.nii.gz"
    write_nifti(path, data, AFFINE)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    volume = read_ct_volume(path)
    assert volume.shape == (1, 6, 5, 4)
    assert np.allclose(volume.affine.numpy(), AFFINE)
    assert np.allclose(volume[0].numpy(), data)
    on_disk = nib.load(path)
    assert np.allclose(on_disk.affine, AFFINE) and on_disk.shape == (6, 5, 4)
    with pytest.raises(UserInputError, match=r"must end in \.nii"):
        write_nifti(tmp_path / "scan.png", data, AFFINE)


def _nifti(path: Path, data: np.ndarray) -> Path:
    nib.save(nib.Nifti1Image(data, AFFINE), path)
    return path


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("nan.nii.gz", np.where(np.eye(4, dtype=bool)[None].repeat(4, 0), np.nan, 1.0).astype(np.float32),
         "16 voxels are NaN or infinite"),
        ("slice.nii.gz", np.ones((9, 7, 1), np.float32), r"a 2D image \(9x7\) where a 3D volume is required"),
        ("image2d.nii", np.ones((9, 7), np.float32), r"a 2D image \(9x7\)"),
    ],
)
def test_bad_nifti_volumes(tmp_path: Path, name: str, data: np.ndarray, message: str) -> None:
    path = _nifti(tmp_path / name, data)
    with pytest.raises(UserInputError, match=message) as info:
        read_ct_volume(path)
    assert str(path) in str(info.value)


def test_unreadable_files_and_wrong_channel_count(tmp_path: Path) -> None:
    broken = tmp_path / "broken.nii.gz"
    broken.write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(UserInputError, match=r"broken\.nii\.gz: cannot read as NIfTI"):
        read_ct_volume(broken)
    not_dicom = tmp_path / "scan.dcm"
    not_dicom.write_bytes(b"hello")
    with pytest.raises(UserInputError, match=r"scan\.dcm: cannot read as DICOM"):
        read_ct_volume(not_dicom)
    with pytest.raises(UserInputError, match="file not found"):
        read_ct_volume(tmp_path / "missing.nii.gz")
    with pytest.raises(UserInputError, match="unsupported file type"):
        read_ct_volume(_npz(tmp_path / "volumes.npz"))
    two_channels = read_ct_volume(_nifti(tmp_path / "multi.nii.gz", np.ones((5, 5, 5, 2), np.float32)))
    assert two_channels.shape == (2, 5, 5, 5)
    with pytest.raises(UserInputError, match=r"multi\.nii\.gz: has 2 channel\(s\), the model expects 1"):
        check_volume(two_channels, tmp_path / "multi.nii.gz", in_channels=1)


def test_real_nifti_keeps_its_affine(require_data) -> None:
    path = require_data("ct", "totalsegmentator_example", "example_ct_sm.nii.gz")
    volume = read_ct_volume(path)
    reference = nib.load(path)
    assert volume.shape == (1, *reference.shape)
    assert np.allclose(volume.affine.numpy(), reference.affine)
    assert np.array_equal(volume[0].numpy(), reference.get_fdata(dtype=np.float32))  # Hounsfield units, unchanged


def test_single_dicom_slice_is_refused_with_a_hint(require_data) -> None:
    path = require_data("ct", "pydicom_ct_small", "CT_small.dcm")
    message = r"CT_small\.dcm: a 2D image \(128x128\).*folder that holds the whole series"
    with pytest.raises(UserInputError, match=message):
        read_ct_volume(path)


def test_dicom_series_folder_reads_as_one_volume_in_hounsfield_units(require_data, tmp_path: Path) -> None:
    pydicom = pytest.importorskip("pydicom")
    source = pydicom.dcmread(require_data("ct", "pydicom_ct_small", "CT_small.dcm"))
    series = tmp_path / "series"
    series.mkdir()
    x0, y0, z0 = (float(v) for v in source.ImagePositionPatient)
    for index in range(4):
        ds = source.copy()
        ds.ImagePositionPatient = [x0, y0, z0 + 2.0 * index]
        ds.InstanceNumber = index + 1
        ds.SOPInstanceUID = f"{source.SOPInstanceUID}.{index + 1}"
        ds.save_as(series / f"slice{index}.dcm")
    volume = read_ct_volume(series)
    assert volume.shape == (1, 128, 128, 4)
    expected_hu = source.pixel_array.astype(np.float32) * float(source.RescaleSlope) + float(source.RescaleIntercept)
    assert np.isclose(float(volume[0, ..., 0].mean()), float(expected_hu.mean()))
    assert np.isclose(abs(float(volume.affine[2, 2])), 2.0)  # slice spacing from the positions
    assert os.path.samefile(volume.meta["filename_or_obj"], series)


def test_medmnist_volumes_padded_once_equal_per_item_padding(tmp_path: Path) -> None:
    from monai.transforms import Compose, DivisiblePad

    from bioattn.tasks.ct.data import load_medmnist

    (tmp_path / "ct" / "odd").mkdir(parents=True)
    _npz(tmp_path / "ct" / "odd" / "odd.npz", shape=(5, 8, 7))
    data = load_medmnist(tmp_path, "odd", 28, divisible_by=4)
    split = load_medmnist3d_npz(tmp_path / "ct" / "odd" / "odd.npz")
    for name in ("train", "val"):
        per_item = VolumeDataset(split[name], DivisiblePad(k=4))
        for index in range(len(per_item)):
            image, label = data.splits[name][index]
            expected, expected_label = per_item[index]
            assert image.shape == (1, 8, 8, 8) and torch.equal(image, expected) and label == expected_label
    augmentation = train_augmentation(rotate_prob=1.0)
    torch.manual_seed(5)
    served = data.augmented(augmentation)[2][0]
    torch.manual_seed(5)
    assert torch.equal(served, VolumeDataset(split["train"], Compose([DivisiblePad(k=4), augmentation]))[2][0])


def test_foreground_distance_is_the_city_block_depth_inside_the_mask() -> None:
    volume = torch.zeros(2, 2, 9, 9, 9)
    volume[0, 0, 1:8, 1:8, 1:8] = 0.8  # a 7³ cube, above the 0.5 threshold; channel 1 is ignored
    volume[0, 1] = 1.0
    volume[1, 0] = 1.0  # all foreground: the outside of the volume is the background
    depth = foreground_distance(volume)
    assert depth.shape == (2, 1, 9, 9, 9) and depth.dtype == volume.dtype
    cube = depth[0, 0]
    assert cube[4, 4, 4] == 4 and cube[1, 4, 4] == 1 and cube[2, 3, 4] == 2 and cube[0].abs().sum() == 0
    # the city-block distance to the nearest background voxel, checked against a brute-force search
    inside = torch.nonzero(volume[0, 0] > 0.5)
    outside = torch.nonzero(volume[0, 0] <= 0.5)
    brute = torch.cdist(inside.float(), outside.float(), p=1).min(dim=1).values
    assert torch.equal(cube[tuple(inside.T)], brute)
    assert depth[1, 0, 0, 4, 4] == 1 and depth[1, 0, 4, 4, 4] == 5
    # flips of the volume flip the depth (flip test-time averaging sees the same channel)
    assert torch.equal(foreground_distance(volume.flip(2, 4)), depth.flip(2, 4))
    assert foreground_distance(torch.zeros(1, 1, 4, 4, 4)).abs().sum() == 0
    with pytest.raises(ValueError, match=r"expected volumes \(B, C, D, H, W\)"):
        foreground_distance(torch.zeros(1, 4, 4, 4))


def test_preprocessing_json_is_read_and_written_by_one_class(tmp_path):
    import json

    from bioattn.data.ct import PREPROCESSING_NAME, SavedPreprocessing, VolumePreprocessing

    saved = SavedPreprocessing(source="manifest", preprocessing=VolumePreprocessing(window=(-160.0, 240.0), size=(16, 16, 16)),
                               flip_tta=True, profile={"binary": False, "mean": {"mean": 0.2}})
    saved.save(tmp_path)
    assert SavedPreprocessing.load(tmp_path) == saved
    on_disk = json.loads((tmp_path / PREPROCESSING_NAME).read_text())
    assert on_disk["training_volumes"] == saved.profile and on_disk["format"] == 1
    assert SavedPreprocessing.load(tmp_path / "no_such_run") is None
    (tmp_path / PREPROCESSING_NAME).write_text('{"source": "manifest"}')
    with pytest.raises(UserInputError, match="not a valid preprocessing.json"):
        SavedPreprocessing.load(tmp_path)
