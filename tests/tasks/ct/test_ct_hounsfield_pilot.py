"""A default ``bioattn train ct`` on a small pilot of CT volumes in Hounsfield units: the volumes are recognised as HU
and windowed onto soft tissue (the lesion stays visible in the model input, the window is saved and re-applied by
``predict``), masks and other intensities are left alone, an explicit --intensity-window wins, and (slow) the default run keeps
a model above chance whose predictions are not constant, right on most new volumes."""
from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import torch

from bioattn.cli import main as cli_main
from bioattn.data.ct import VolumePreprocessing, read_ct_volume
from bioattn.tasks.ct.train import CTOptions, with_default_window
from bioattn.tasks.ct.data import SOFT_TISSUE_WINDOW, hounsfield_window, load_manifest, looks_like_hounsfield
from tests.small_data_pilots import ct_affine, ct_volume, write_ct_pilot


def _manifest(folder: Path, volumes: list[np.ndarray]) -> Path:
    (folder / "scans").mkdir(parents=True)
    rows = ["image,label"]
    for index, volume in enumerate(volumes):
        nib.save(nib.Nifti1Image(volume.astype(np.float32), ct_affine()), folder / "scans" / f"v{index}.nii.gz")
        rows.append(f"scans/v{index}.nii.gz,{'a' if index % 2 else 'b'}")
    (folder / "labels.csv").write_text("\n".join(rows) + "\n")
    return folder / "labels.csv"


def test_hounsfield_volumes_are_recognised_and_masks_or_unit_intensities_are_not(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    assert looks_like_hounsfield(torch.from_numpy(ct_volume(rng, True, (24, 24, 12)))[None])
    mask = (rng.random((1, 24, 24, 12)) > 0.5).astype(np.float32)
    assert not looks_like_hounsfield(torch.from_numpy(mask))
    assert not looks_like_hounsfield(torch.from_numpy(mask * 2000 - 1000))  # two values: a mask, whatever its scale
    assert not looks_like_hounsfield(torch.from_numpy(rng.uniform(0, 1, (1, 24, 24, 12)).astype(np.float32)))
    assert not looks_like_hounsfield(torch.from_numpy(rng.normal(300, 100, (1, 24, 24, 12)).astype(np.float32)))

    pilot, _ = write_ct_pilot(tmp_path / "hu", volumes=8, new=0, shape=(24, 24, 12))
    assert hounsfield_window(pilot, seed=0) == SOFT_TISSUE_WINDOW
    masks = _manifest(tmp_path / "masks", [(rng.random((24, 24, 12)) > 0.5) * 1.0 for _ in range(8)])
    assert hounsfield_window(masks, seed=0) is None


def test_the_default_window_applies_to_hounsfield_manifests_only_and_a_given_window_wins(tmp_path: Path) -> None:
    pilot, _ = write_ct_pilot(tmp_path / "hu", volumes=8, new=0, shape=(24, 24, 12))
    assert with_default_window(CTOptions(out=tmp_path / "r", manifest=pilot), 0).window == SOFT_TISSUE_WINDOW
    given = CTOptions(out=tmp_path / "r", manifest=pilot, window=(-1000.0, 1000.0))
    assert with_default_window(given, 0).window == (-1000.0, 1000.0)
    rng = np.random.default_rng(1)
    masks = _manifest(tmp_path / "masks", [(rng.random((24, 24, 12)) > 0.5) * 1.0 for _ in range(8)])
    assert with_default_window(CTOptions(out=tmp_path / "r", manifest=masks), 0).window is None
    assert with_default_window(CTOptions(out=tmp_path / "r"), 0).window is None  # MedMNIST: nothing changes


@pytest.mark.slow
def test_the_lesion_is_visible_in_the_model_input_after_the_default_preprocessing(tmp_path: Path) -> None:
    """With the soft-tissue window, the faintest lesion of the pilot (100 HU above tissue) reaches input values that
    no lesion-free volume has (beyond its noise), after reorientation and resizing to the default 64³; without a
    window the same lesion is under 10 % of the input range (air at -1000 dominates it)."""
    pilot, _ = write_ct_pilot(tmp_path / "hu", volumes=12, new=0, contrast=(100.0, 100.0), radius_mm=(4.0, 4.0))
    options = with_default_window(CTOptions(out=tmp_path / "r", manifest=pilot), 0)
    data = load_manifest(pilot, options.preprocessing(), seed=0)
    lesion = data.class_names.index("lesion")
    top = {0: [], 1: []}
    for index in range(len(data.labels["train"])):
        image, label = data.splits["train"][index]
        assert image.shape == (1, 64, 64, 64) and 0.0 <= float(image.min()) and float(image.max()) <= 1.0
        top[int(label) == lesion].append(float(torch.quantile(image.flatten(), 0.9999)))
    assert min(top[True]) > max(top[False]) + 0.05

    raw = read_ct_volume(tmp_path / "hu" / "scans" / "case001.nii.gz")
    assert 100 / float(raw.max() - raw.min()) < 0.1


@pytest.mark.slow
def test_the_default_run_on_a_small_hu_pilot_learns_and_predict_is_right_on_most_new_volumes(tmp_path: Path) -> None:
    """24 volumes (20 train, 4 validation) with the defaults (the ResNet, then the attention model started from it):
    the kept model is above chance on validation, does not predict one class for all, and ``predict ct`` (which
    re-applies the saved window) is right on at least 9 of 12 new volumes of the same kind."""
    manifest, new = write_ct_pilot(tmp_path / "pilot", volumes=24, new=12, seed=1)
    out = tmp_path / "run"
    assert cli_main(["train", "ct", "--manifest", str(manifest), "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["preprocessing"]["window"] == list(SOFT_TISSUE_WINDOW)
    assert metrics["models"]["hybrid CNN+attention (bioattn)"]["init"] == "resnet"
    model = metrics["models"][metrics["kept_model"]["name"]]
    assert model["val_accuracy"] > 0.5 and model["val_auroc"] > 0.5
    assert sum(count > 0 for count in model["trust"]["predicted_counts"].values()) == 2, model["trust"]
    assert not [line for line in model["trust"]["warnings"] if line.startswith("warning:")]
    saved = json.loads((out / "preprocessing.json").read_text())
    assert VolumePreprocessing.from_dict(saved["preprocessing"]).window == SOFT_TISSUE_WINDOW

    predictions = tmp_path / "new.csv"
    assert cli_main(["predict", "ct", "--model", str(out), "--input", str(new), "--output", str(predictions)]) == 0
    with open(new) as handle:
        truth = [row["label"] for row in csv.DictReader(handle)]
    with open(predictions) as handle:
        predicted = [row["predicted_label"] for row in csv.DictReader(handle)]
    assert len(predicted) == len(truth) == 12 and len(set(predicted)) == 2
    assert sum(p == t for p, t in zip(predicted, truth)) >= 9


def test_a_manifest_run_that_did_not_learn_gets_hints_naming_its_likely_causes() -> None:
    from bioattn.tasks.ct.options import HYBRID_NAME
    from bioattn.tasks.ct.report import not_learned_hints
    from bioattn.tasks.ct.data import CTData
    from bioattn.tasks.ct.preprocessing import SavedPreprocessing

    labels = {"train": np.array([0] * 20 + [1] * 12), "val": np.array([0, 0, 1, 1])}
    raw = VolumePreprocessing(orientation="RAS", resize=(32, 32, 32))
    data = CTData(source="manifest", path=Path("labels.csv"), splits={}, labels=labels, class_names=["a", "b"],
                  in_channels=1, augmented=lambda transform: None, preprocessing=raw)
    profile = {"binary": False, "intensity_min": -1000.0, "intensity_max": 350.0, "shape_max": [96, 96, 40]}
    saved = SavedPreprocessing(source="manifest", preprocessing=raw, profile=profile)
    stuck = {HYBRID_NAME: {"trust": {"warnings": ["warning: the kept model predicts one class (a) for all 4 ..."]}}}
    hints = not_learned_hints(data, saved, stuck)
    assert len(hints) == 3 and all(line.startswith("hint: ") for line in hints)
    assert "32 volumes (12 of the smallest class)" in hints[0] and "--cv 5" in hints[0]
    assert "trained from scratch" in hints[0]
    started = not_learned_hints(data, saved, {HYBRID_NAME: {**stuck[HYBRID_NAME], "init": "resnet"}})
    assert "starts as the same-run ResNet" in started[0] and "from scratch" not in started[0]
    assert "-1000..350" in hints[1] and "--intensity-window" in hints[1]
    assert "96 x 96 x 40 voxels are resized to 32 x 32 x 32" in hints[2]

    learned = {HYBRID_NAME: {"val_accuracy": 0.75, "trust": {"class_counts": {"a": 2, "b": 2},
                                                             "warnings": ["note: the validation split is small ..."]}}}
    assert not_learned_hints(data, saved, learned) == []
    at_chance = {HYBRID_NAME: {**learned[HYBRID_NAME], "val_accuracy": 0.5}}
    assert len(not_learned_hints(data, saved, at_chance)) == 3
    windowed = dataclasses.replace(data, preprocessing=dataclasses.replace(raw, window=(-160.0, 240.0), resize=(96, 96, 48)))
    assert len(not_learned_hints(windowed, saved, stuck)) == 1
