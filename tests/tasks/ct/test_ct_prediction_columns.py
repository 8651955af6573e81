"""``predict ct`` writes the same columns, in the same order, for a manifest, a single NIfTI/DICOM volume and a
``.npz``: ``image,label,split,index``, one ``p_<class>`` per class, ``predicted_label``, ``warning``."""
from __future__ import annotations

import csv
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from bioattn.tasks.ct.predict import CTPrediction, write_predictions
from tests.helpers.ct_volumes import predict_ct_rows, write_csv_rows, write_tiny_ct_run

COLUMNS = ["image", "label", "split", "index", "p_a", "p_b", "predicted_label", "warning"]


def _written(path: Path, predictions: list[CTPrediction]) -> list[dict[str, str]]:
    write_predictions(path, predictions, ["a", "b"], threshold=0.5)
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_a_manifest_row_a_single_volume_and_an_npz_volume_get_the_same_columns(tmp_path: Path) -> None:
    p = np.array([0.25, 0.75])
    kinds = {"manifest": CTPrediction("scans/s1.nii.gz", p, "b", "val", where="labels.csv, line 2"),
             "single": CTPrediction("scan.nii.gz", p, warnings=["far from the training volumes"]),
             "npz": CTPrediction("vols.npz", p, 1, "test", 4)}
    rows = {kind: _written(tmp_path / f"{kind}.csv", [prediction]) for kind, prediction in kinds.items()}
    for kind, (row,) in rows.items():
        assert list(row) == COLUMNS, kind
        assert row["p_b"] == "0.75" and row["predicted_label"] == "b", kind
    assert [rows["manifest"][0][c] for c in ("image", "label", "split", "index")] == ["scans/s1.nii.gz", "b", "val", ""]
    assert [rows["single"][0][c] for c in ("image", "label", "split", "index")] == ["scan.nii.gz", "", "", ""]
    assert rows["single"][0]["warning"] == "far from the training volumes"
    assert [rows["npz"][0][c] for c in ("image", "label", "split", "index")] == ["vols.npz", "1", "test", "4"]


def test_the_command_writes_one_header_for_a_manifest_and_for_its_one_scan(tmp_path: Path) -> None:
    run, npz = write_tiny_ct_run(tmp_path)
    scan = tmp_path / "scan.nii.gz"
    nib.save(nib.Nifti1Image(np.random.default_rng(0).random((16,) * 3).astype(np.float32), np.eye(4)), scan)
    manifest = write_csv_rows(tmp_path / "to_score.csv", ["image"], [[scan.name]])
    single = predict_ct_rows(run, scan, tmp_path / "single.csv")
    listed = predict_ct_rows(run, manifest, tmp_path / "manifest.csv")
    packed = predict_ct_rows(run, npz, tmp_path / "npz.csv")
    header = [*COLUMNS[:4], "p_class_0", "p_class_1", *COLUMNS[-2:]]  # an untrained run's class names
    assert list(single[0]) == list(listed[0]) == list(packed[0]) == header
    assert Path(listed[0]["image"]).name == Path(single[0]["image"]).name == scan.name
    assert float(listed[0]["p_class_1"]) == pytest.approx(float(single[0]["p_class_1"]), abs=1e-6)
