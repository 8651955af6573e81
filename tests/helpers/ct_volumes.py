"""Synthetic CT volumes and the files a user brings: 16³ binary masks (values 0 and 100) with sparse noise, class
``blob`` also holding a 5³ cube, written as NIfTI (an affine that flips x, 1.5 mm slices, so reorientation matters)
or as a DICOM series; a labels CSV of them; the flags of a quick ``bioattn train ct`` on them, and ``bioattn predict
ct`` read back as rows. Shared by the CT and ensemble tests and the session fixtures of conftest.py."""
from __future__ import annotations

import csv
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from bioattn.cli import main as cli_main

AFFINE = np.array([[-1.0, 0, 0, 10.0], [0, 1.0, 0, -5.0], [0, 0, 1.5, 3.0], [0, 0, 0, 1]])
EDGE = 16
VOLUMES = 12
MASK_VALUE = 100.0
TRAIN_FLAGS = ["--quick", "--baseline", "none", "--protocol", "tuned", "--size", str(EDGE), "--intensity-window", "0", "100"]


def noisy_mask(rng: np.random.Generator, blob: bool) -> np.ndarray:
    """An ``EDGE``³ mask of ``MASK_VALUE`` with sparse noise; ``blob``: also a 5³ cube somewhere inside."""
    volume = (rng.random((EDGE,) * 3) > 0.97).astype(np.float32)
    if blob:
        x, y, z = rng.integers(3, EDGE - 8, size=3)
        volume[x:x + 5, y:y + 5, z:z + 5] = 1.0
    return volume * MASK_VALUE


def write_nifti(path: Path, volume: np.ndarray, affine: np.ndarray = AFFINE) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(volume, affine), path)
    return path


def write_dicom_series(folder: Path, volume: np.ndarray) -> Path:
    """One axial slice per z, 1 x 1 mm pixels, 1.5 mm apart; pixel values are the volume's (rescale 1, 0)."""
    pydicom = pytest.importorskip("pydicom")
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import CTImageStorage, ExplicitVRLittleEndian, generate_uid

    folder.mkdir(parents=True)
    series, study = generate_uid(), generate_uid()
    for k in range(volume.shape[2]):
        meta = FileMetaDataset()
        meta.MediaStorageSOPClassUID, meta.MediaStorageSOPInstanceUID = CTImageStorage, generate_uid()
        meta.TransferSyntaxUID = ExplicitVRLittleEndian
        ds = Dataset()
        ds.file_meta = meta
        ds.SOPClassUID, ds.SOPInstanceUID = CTImageStorage, meta.MediaStorageSOPInstanceUID
        ds.StudyInstanceUID, ds.SeriesInstanceUID, ds.Modality, ds.PatientID = study, series, "CT", "synthetic"
        ds.InstanceNumber, ds.ImagePositionPatient = k + 1, [0.0, 0.0, 1.5 * k]
        ds.ImageOrientationPatient, ds.PixelSpacing, ds.SliceThickness = [1, 0, 0, 0, 1, 0], [1.0, 1.0], 1.5
        ds.Rows, ds.Columns, ds.SamplesPerPixel, ds.PhotometricInterpretation = EDGE, EDGE, 1, "MONOCHROME2"
        ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 0
        ds.RescaleSlope, ds.RescaleIntercept = 1, 0
        ds.PixelData = np.ascontiguousarray(volume[:, :, k].T.astype(np.uint16)).tobytes()
        pydicom.dcmwrite(folder / f"slice{k:03d}.dcm", ds, enforce_file_format=True)
    return folder


def write_csv_rows(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    path.write_text("\n".join(",".join(row) for row in [header, *rows]) + "\n")
    return path


def read_csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def predict_ct_rows(run: Path, input_: Path, output: Path, *flags: str) -> list[dict[str, str]]:
    assert cli_main(["predict", "ct", "--model", str(run), "--input", str(input_), "--output", str(output), *flags]) == 0
    return read_csv_rows(output)


def write_tiny_ct_run(folder: Path) -> tuple[Path, Path]:
    """An untrained two-layer ``HybridCT3D`` saved as ``folder/run`` (seed 0) and two random binary 8³ volumes as a
    MedMNIST-shaped ``folder/vols.npz`` (labels 0 and 1): the smallest input ``explain ct`` accepts."""
    import torch

    from bioattn.models.hybrid_ct import HybridCT3D

    torch.manual_seed(0)
    HybridCT3D(1, 2, stem_channels=[4, 8], stem_strides=[2, 2], embed_dim=12, num_heads=2, num_layers=2,
               dropout=0.0).eval().save_pretrained(folder / "run")
    images = (np.random.default_rng(1).random((2, 8, 8, 8)) > 0.5).astype(np.uint8) * 255
    np.savez(folder / "vols.npz", val_images=images, val_labels=np.array([[0], [1]]))
    return folder / "run", folder / "vols.npz"
