"""Own CT data: a labels CSV of NIfTI files and a DICOM series → ``bioattn train ct --manifest`` → predict →
explain.

Synthetic volumes written by the tests (``tests/helpers/ct_volumes.py``): 16³ binary masks (values 0 and 100) with
sparse noise; class ``blob`` also holds a 5³ cube. The NIfTI affine flips x and has 1.5 mm slices, so reorientation
matters.
"""
from __future__ import annotations

import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from bioattn.cli import main as cli_main
from bioattn.data.ct_manifest import class_names_of, read_manifest, split_rows
from bioattn.errors import UserInputError
from bioattn.metrics import classification_metrics
from bioattn.models.hybrid_ct import HybridCT3D
from bioattn.tasks.driver import check_metrics
from tests.helpers.ct_volumes import (AFFINE, EDGE, TRAIN_FLAGS, VOLUMES, noisy_mask, predict_ct_rows, read_csv_rows,
                                     write_csv_rows, write_nifti)


@pytest.fixture(scope="module")
def own_data(ct_own_data: Path) -> Path:
    """``labels.csv`` beside ``scans/``: 12 NIfTI masks and one DICOM series (the session's, conftest.py)."""
    return ct_own_data


@pytest.fixture(scope="module")
def trained(ct_own_run: tuple[Path, dict[str, int]]) -> tuple[Path, dict[str, int]]:
    """The session's quick tuned-protocol run on :func:`own_data` and the NIfTI reads it made (conftest.py)."""
    return ct_own_run


def _probabilities(row: dict[str, str]) -> np.ndarray:
    return np.array([float(row["p_blob"]), float(row["p_none"])])


# ------------------------------------------------------------------------------------------- training


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_training_reads_every_file_once_and_saves_classes_and_preprocessing(own_data: Path, trained) -> None:
    run, reads = trained
    niftis = sorted(str(p.resolve()) for p in (own_data.parent / "scans").glob("*.nii.gz"))
    # 3 epochs, a validation pass after each, and the statistics of the training volumes: every file read once
    assert reads == {path: 1 for path in niftis}
    model = HybridCT3D.from_pretrained(run)
    assert model.class_names == ["blob", "none"]
    assert model.config["distance_channel"]  # binary masks after the window: depth in the mask is on by default
    saved = json.loads((run / "preprocessing.json").read_text())
    assert saved["source"] == "manifest" and saved["flip_tta"]
    assert saved["preprocessing"] == {"orientation": "RAS", "spacing": None, "window": [0.0, 100.0],
                                      "resize": [EDGE] * 3, "size": None}
    profile = saved["training_volumes"]
    assert profile["binary"] and (profile["intensity_min"], profile["intensity_max"]) == (0.0, 1.0)
    assert profile["model_input_shape"] == [EDGE] * 3 and profile["spacing_min"] == [1.0, 1.0, 1.5]
    metrics = json.loads((run / "metrics.json").read_text())
    (hybrid,) = metrics["models"].values()
    assert {"val_auroc", "val_accuracy", "val_mcc", "val_f1", "val_loss", "val_auroc_no_tta",
            "val_auroc_last_epoch"} <= set(hybrid)
    assert metrics["class_names"] == ["blob", "none"] and metrics["manifest"] == str(own_data)
    splits = read_csv_rows(run / "splits.csv")
    assert sorted(int(r["manifest_line"]) for r in splits) == list(range(2, VOLUMES + 3))
    val = [r for r in splits if r["split"] == "val"]
    assert metrics["splits"] == {"train": VOLUMES + 1 - len(val), "val": len(val)}
    assert {r["label"] for r in val} == {"blob", "none"}  # stratified: both classes held out
    assert (run / "val_auc.png").is_file()


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_predict_on_the_validation_rows_reproduces_the_run(trained, tmp_path: Path) -> None:
    """Preprocessing and flip averaging come from the run: the validation numbers come back without a flag."""
    run, _ = trained
    (hybrid,) = json.loads((run / "metrics.json").read_text())["models"].values()
    rows = predict_ct_rows(run, run / "splits.csv", tmp_path / "val.csv", "--split", "val")
    labels = np.array([0 if r["label"] == "blob" else 1 for r in rows])
    # a small training set: the run's threshold sits between its training volumes' classes, and the validation
    # accuracy is measured at it
    threshold = HybridCT3D.from_pretrained(run).threshold
    assert hybrid["threshold"] == threshold
    scores = classification_metrics(labels, np.stack([_probabilities(r) for r in rows]), threshold=threshold)
    assert scores["loss"] == pytest.approx(hybrid["val_loss"], rel=1e-4)
    assert scores["accuracy"] == hybrid["val_accuracy"]
    plain = predict_ct_rows(run, run / "splits.csv", tmp_path / "plain.csv", "--split", "val", "--tta", "none")
    assert not np.allclose([_probabilities(r) for r in plain], [_probabilities(r) for r in rows], atol=1e-6)


# ------------------------------------------------------------------------------------------ prediction


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_predict_a_manifest_in_input_order_and_a_single_scan_alike(own_data: Path, trained, tmp_path: Path) -> None:
    run, _ = trained
    order = [7, 0, 12, 3, 10]  # 12: the DICOM series
    listed = [line.split(",")[0] for line in own_data.read_text().splitlines()[1:]]
    manifest = write_csv_rows(own_data.parent / "to_score.csv", ["image"], [[listed[i]] for i in order])
    rows = predict_ct_rows(run, manifest, tmp_path / "scores.csv")
    assert list(rows[0]) == ["image", "label", "split", "index", "p_blob", "p_none", "predicted_label", "warning"]
    assert [Path(r["image"]).name for r in rows] == [Path(listed[i]).name for i in order]
    threshold = HybridCT3D.from_pretrained(run).threshold  # the run's decision threshold on class 1 ("none")
    for row in rows:
        probabilities = _probabilities(row)
        assert probabilities.sum() == pytest.approx(1.0, abs=1e-5) and (probabilities >= 0).all()
        assert row["predicted_label"] == ("none" if probabilities[1] >= threshold else "blob")
        assert row["label"] == "" and row["warning"] == ""
    # one file through the invertible array pipeline gives what its manifest row got through the dictionary one
    [single] = predict_ct_rows(run, own_data.parent / listed[7], tmp_path / "one.csv")
    assert np.allclose(_probabilities(single), _probabilities(rows[0]), atol=2e-6)


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_saved_preprocessing_is_reapplied_and_flags_replace_it(own_data: Path, trained, tmp_path: Path) -> None:
    run, _ = trained
    scan = own_data.parent / "scans" / "scan05.nii.gz"
    [saved] = predict_ct_rows(run, scan, tmp_path / "saved.csv")
    [explicit] = predict_ct_rows(run, scan, tmp_path / "explicit.csv", "--intensity-window", "0", "100", "--orientation",
                          "RAS", "--size", str(EDGE), str(EDGE), str(EDGE), "--fit", "resize", "--tta", "flips")
    assert saved == explicit
    [other_window] = predict_ct_rows(run, scan, tmp_path / "other.csv", "--intensity-window", "0", "1000")
    assert not np.allclose(_probabilities(other_window), _probabilities(saved), atol=1e-6)
    assert other_window["warning"]  # masks at a tenth of their training intensity are not what the model saw


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_inputs_unlike_the_training_volumes_are_flagged(trained, tmp_path: Path, capsys) -> None:
    run, _ = trained
    hounsfield = write_nifti(tmp_path / "ct_in_hu.nii.gz", np.random.default_rng(1).uniform(
        -1000, 1000, size=(24, 24, 20)).astype(np.float32), np.diag([0.8, 0.8, 2.5, 1.0]))
    familiar = write_nifti(tmp_path / "new_mask.nii.gz", noisy_mask(np.random.default_rng(7), blob=True))
    capsys.readouterr()
    [row] = predict_ct_rows(run, hounsfield, tmp_path / "hu.csv")
    err = capsys.readouterr().err
    [line] = [line for line in err.splitlines() if line.startswith("warning:")]
    assert line.startswith(f"warning: {hounsfield}: the model was trained on binary masks")
    assert "field of view" in line and "binary masks" in row["warning"]
    [row] = predict_ct_rows(run, familiar, tmp_path / "mask.csv")
    assert row["warning"] == "" and "warning" not in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ explanation


@pytest.mark.slow
def test_explain_a_nifti_with_the_saved_preprocessing(own_data: Path, trained, tmp_path: Path) -> None:
    run, _ = trained
    scan = own_data.parent / "scans" / "scan03.nii.gz"
    out = tmp_path / "explain"
    assert cli_main(["explain", "ct", "--model", str(run), "--input", str(scan), "--out", str(out)]) == 0
    rollout = nib.load(out / "rollout.nii.gz")
    assert rollout.shape == (EDGE,) * 3 and np.allclose(rollout.affine, AFFINE)
    assert np.all(rollout.get_fdata() >= 0) and rollout.get_fdata().max() > 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model_input_shape"] == [EDGE] * 3 and summary["warnings"] == []
    [same] = predict_ct_rows(run, scan, tmp_path / "same.csv")  # the run's own flip averaging, as predict ct applies it
    assert np.allclose([summary["probabilities"][name] for name in ("blob", "none")], _probabilities(same), atol=1e-5)


# ------------------------------------------------------------------------------------------ bad manifests


def _bad_manifests(root: Path) -> dict[str, tuple[Path, str]]:
    """name -> (manifest, what the error line says after ``error: <manifest>``)."""
    rng = np.random.default_rng(3)
    first, second, third = "scans/a.nii.gz", "scans/b.nii.gz", "scans/c.nii.gz"
    for name, blob in ((first, False), (second, True), (third, True)):
        write_nifti(root / name, noisy_mask(rng, blob))
    (root / "scans" / "broken.nii.gz").write_bytes(b"\x1f\x8b not a NIfTI at all")
    image_label = ["image", "label"]
    return {
        "missing column": (write_csv_rows(root / "no_label.csv", ["image", "class"], [[first, "a"]]),
                           ", line 1: missing column 'label' (the header has image, class)"),
        "missing file": (write_csv_rows(root / "missing.csv", image_label, [[first, "a"], ["scans/gone.nii.gz", "b"]]),
                         f", line 3: {root / 'scans' / 'gone.nii.gz'}: file not found"),
        "unknown split": (write_csv_rows(root / "split.csv", [*image_label, "split"],
                                     [[first, "a", "train"], [second, "b", "validation"]]),
                          ", line 3: unknown split 'validation' (expected train, val or test)"),
        "one class": (write_csv_rows(root / "one_class.csv", image_label, [[first, "a"], [second, "a"]]),
                      ": all 2 volumes (lines 2-3) have the label 'a'; training needs at least 2 classes"),
        "empty label": (write_csv_rows(root / "empty_label.csv", image_label, [[first, "a"], [second, ""]]),
                        ", line 3: empty label"),
        "duplicate": (write_csv_rows(root / "duplicate.csv", image_label, [[first, "a"], [first, "b"]]),
                      f", line 3: {root / first} is already listed on line 2"),
        "no validation volume of a class": (
            write_csv_rows(root / "no_val.csv", [*image_label, "split"], [[first, "a", "train"], [second, "b", "train"],
                                                                     ["scans/broken.nii.gz", "a", "val"]]),
            ": the validation split has no volume of class 'b'"),
        "empty manifest": (write_csv_rows(root / "empty.csv", image_label, []), ": lists no volumes (only a header line)"),
        "unreadable image": (write_csv_rows(root / "unreadable.csv", image_label,
                                        [[first, "a"], [second, "b"], ["scans/broken.nii.gz", "a"], [third, "b"]]),
                             f", line 4: {root / 'scans' / 'broken.nii.gz'}: cannot read as NIfTI"),
    }


def test_bad_manifests_exit_2_naming_the_manifest_and_line(tmp_path: Path, capsys) -> None:
    for name, (manifest, message) in _bad_manifests(tmp_path).items():
        out = tmp_path / "runs" / name.replace(" ", "_")
        code = cli_main(["train", "ct", "--manifest", str(manifest), "--out", str(out), *TRAIN_FLAGS])
        errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
        assert code == 2, name
        assert len(errors) == 1 and errors[0].startswith(f"error: {manifest}{message}"), (name, errors)
        assert not out.exists(), name


# ------------------------------------------------------------------------------------------ manifest rules


def test_classes_sort_numerically_and_the_validation_split_is_stratified_and_seeded(tmp_path: Path) -> None:
    assert class_names_of(["10", "2", "9", "2"]) == ["2", "9", "10"]
    assert class_names_of(["b", "a", "10"]) == ["10", "a", "b"]
    labels = ["x"] * 10 + ["y"] * 5
    for index in range(len(labels)):
        (tmp_path / f"v{index}.nii.gz").touch()  # only checked for existence before reading
    plain = read_manifest(write_csv_rows(tmp_path / "plain.csv", ["image", "label"],
                                     [[f"v{i}.nii.gz", label] for i, label in enumerate(labels)]), require_labels=True)
    splits, names = split_rows(plain, seed=0)
    assert names == ["x", "y"]
    assert sorted(row.label for row in splits["val"]) == ["x", "x", "y"]  # 20 % of each class
    assert [row.line for row in splits["val"]] == sorted(row.line for row in splits["val"])  # file order
    assert len(splits["train"]) == 12 and not {r.line for r in splits["train"]} & {r.line for r in splits["val"]}
    assert split_rows(plain, seed=0)[0] == splits
    assert any(split_rows(plain, seed=seed)[0]["val"] != splits["val"] for seed in (1, 2, 3))
    given = read_manifest(write_csv_rows(tmp_path / "given.csv", ["image", "label", "split"],
                                     [[f"v{i}.nii.gz", label, "VAL" if i in (0, 14) else "train" if i < 12 else "test"]
                                      for i, label in enumerate(labels)]), require_labels=True)
    splits, _ = split_rows(given, seed=0)
    assert [row.line for row in splits["val"]] == [2, 16] and [row.line for row in splits["test"]] == [14, 15]
    with pytest.raises(UserInputError, match=r"given\.csv, line 3: empty image path"):
        read_manifest(write_csv_rows(tmp_path / "given.csv", ["image", "label"], [["v0.nii.gz", "x"], ["", "y"]]),
                      require_labels=True)
    unlabelled = read_manifest(write_csv_rows(tmp_path / "to_score.csv", ["image"], [["v1.nii.gz"]]), require_labels=False)
    assert unlabelled.rows[0].label is None and unlabelled.rows[0].image == tmp_path / "v1.nii.gz"


def test_manifest_size_must_suit_the_cnn_stride(own_data: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    code = cli_main(["train", "ct", "--manifest", str(own_data), "--out", str(out), "--quick", "--size", "20"])
    assert code == 2 and not out.exists()
    assert capsys.readouterr().err.strip() == (
        "error: --size 20 20 20: each of X, Y and Z must be a multiple of the CNN stride 8 (X = 20, Y = 20, Z = 20 are "
        "not); e.g. --size 16 16 16 (the stride is --unshuffle times the product of --stem-strides, and without the "
        "last of them when the model starts from the ResNet: 16 by default above 32 voxels, 8 up to 32)")
    code = cli_main(["train", "ct", "--manifest", str(own_data), "--out", str(out), "--quick", "--size", "24",
                     "--unshuffle", "2"])
    assert code == 2 and not out.exists()
    assert "must be a multiple of the CNN stride 16 (X = 24, Y = 24, Z = 24 are not); e.g. --size 32 32 32" in \
        capsys.readouterr().err


@pytest.mark.slow
def test_intensity_volumes_get_no_distance_channel_unless_asked(tmp_path: Path) -> None:
    """The depth inside a mask means nothing for CT intensities: off by default when the volumes are not binary."""
    rng = np.random.default_rng(1)
    rows = []
    for index in range(8):
        volume = rng.normal(40.0 + 20 * (index % 2), 30.0, (EDGE,) * 3).astype(np.float32)  # HU-like intensities
        write_nifti(tmp_path / f"ct{index}.nii.gz", volume)
        rows.append([f"ct{index}.nii.gz", str(index % 2)])
    manifest = write_csv_rows(tmp_path / "labels.csv", ["image", "label"], rows)
    flags = ["--quick", "--baseline", "none", "--size", str(EDGE), "--intensity-window", "-100", "200"]
    for extra, expected in (([], False), (["--distance-channel"], True)):
        run = tmp_path / f"run{expected}"
        assert cli_main(["train", "ct", "--manifest", str(manifest), "--out", str(run), *flags, *extra]) == 0
        assert HybridCT3D.from_pretrained(run).config["distance_channel"] is expected


@pytest.mark.slow
def test_unshuffled_model_trains_and_predict_reproduces_it(own_data: Path, tmp_path: Path) -> None:
    """``--unshuffle 2``: the stem sees 8³ volumes of 8 channels; the saved model folds new volumes the same way."""
    run = tmp_path / "run"
    assert cli_main(["train", "ct", "--manifest", str(own_data), "--out", str(run), *TRAIN_FLAGS, "--unshuffle", "2",
                     "--stem", "residual", "--stem-channels", "8", "16", "--stem-strides", "1", "2"]) == 0
    model = HybridCT3D.from_pretrained(run)
    assert model.config["unshuffle"] == 2 and model.stride == 4
    (hybrid,) = json.loads((run / "metrics.json").read_text())["models"].values()
    rows = predict_ct_rows(run, run / "splits.csv", tmp_path / "val.csv", "--split", "val")
    labels = np.array([0 if r["label"] == "blob" else 1 for r in rows])
    scores = classification_metrics(labels, np.stack([_probabilities(r) for r in rows]))
    assert scores["loss"] == pytest.approx(hybrid["val_loss"], rel=1e-4)
