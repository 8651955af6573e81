"""One inference path per CT run: ``predict ct``, ``explain ct``, ``from_pretrained(run).predict`` and the Python
``explain_ct`` give the same probability and the same predicted class for one volume (the run's flip averaging,
preprocessing and decision threshold); the positive class of labels ``lesion``/``normal`` is ``lesion``; the
baseline trained beside the attention model is a run directory predict and explain accept; warnings name their
model."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from bioattn.cli import main as cli_main
from bioattn.models import load_pretrained
from bioattn.models.hybrid_ct import HybridCT3D
from bioattn.tasks.ct.volumes import predict_files, predict_proba_files
from tests.small_data_pilots import ct_affine, ct_volume

SHAPE = (24, 24, 12)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A --quick tuned run (flip averaging on, baseline on) on 10 small HU volumes labelled lesion / normal, and one
    more volume to predict."""
    folder = tmp_path_factory.mktemp("ctpath")
    rng = np.random.default_rng(3)
    (folder / "scans").mkdir()
    rows = ["image,label"]
    for index in range(10):
        lesion = index % 2 == 1
        nib.save(nib.Nifti1Image(ct_volume(rng, lesion, SHAPE, radius_mm=(4.0, 5.0)), ct_affine()),
                 folder / "scans" / f"v{index}.nii.gz")
        rows.append(f"scans/v{index}.nii.gz,{'lesion' if lesion else 'normal'}")
    (folder / "labels.csv").write_text("\n".join(rows) + "\n")
    scan = folder / "new.nii.gz"
    nib.save(nib.Nifti1Image(ct_volume(rng, True, SHAPE, radius_mm=(4.0, 5.0)), ct_affine()), scan)
    out = folder / "run"
    assert cli_main(["train", "ct", "--manifest", str(folder / "labels.csv"), "--out", str(out), "--quick",
                     "--size", "16", "--deterministic"]) == 0
    return out, scan


def _predicted_row(model: Path, scan: Path, output: Path) -> dict[str, str]:
    assert cli_main(["predict", "ct", "--model", str(model), "--input", str(scan), "--output", str(output)]) == 0
    with open(output) as handle:
        [row] = list(csv.DictReader(handle))
    return row


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_the_positive_class_of_lesion_and_normal_is_lesion_and_is_stored(run: tuple[Path, Path]) -> None:
    out, _ = run
    assert HybridCT3D.from_pretrained(out).class_names == ["normal", "lesion"]  # class 1: the positive one
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["positive_class"] == "lesion"
    assert "positive class: lesion" in (out / "summary.md").read_text()


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_predict_explain_and_from_pretrained_give_the_same_probability_and_class(
        run: tuple[Path, Path], tmp_path: Path) -> None:
    out, scan = run
    assert json.loads((out / "preprocessing.json").read_text())["flip_tta"] is True
    row = _predicted_row(out, scan, tmp_path / "p.csv")
    predicted_csv = float(row["p_lesion"])
    model = HybridCT3D.from_pretrained(out)
    from_pretrained = float(predict_proba_files(model, scan)[0, model.class_names.index("lesion")])
    assert cli_main(["explain", "ct", "--model", str(out), "--input", str(scan), "--out", str(tmp_path / "e"),
                     "--no-faithfulness"]) == 0
    summary = json.loads((tmp_path / "e" / "summary.json").read_text())
    from bioattn.tasks.ct.explain import explain_ct

    in_python = explain_ct(model, scan, faithfulness=False)
    for value in (from_pretrained, summary["probabilities"]["lesion"], in_python.summary["probabilities"]["lesion"]):
        assert value == pytest.approx(predicted_csv, abs=1e-5)
    assert summary["flip_tta"] and in_python.summary["flip_tta"]
    assert summary["predicted"] == in_python.summary["predicted"] == row["predicted_label"] == predict_files(model, scan)[0]
    # without the flips the probability differs (the run averaged them): the test would see a forgotten average
    assert float(predict_proba_files(model, scan, flip_tta=False)[0, 1]) != pytest.approx(predicted_csv, abs=1e-7)


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_a_saved_decision_threshold_is_applied_by_predict_and_explain(run: tuple[Path, Path], tmp_path: Path) -> None:
    out, scan = run
    copy = tmp_path / "run"
    import shutil

    shutil.copytree(out, copy)
    saved = json.loads((copy / "preprocessing.json").read_text())
    p_lesion = float(_predicted_row(copy, scan, tmp_path / "before.csv")["p_lesion"])
    for threshold, expected in ((p_lesion - 1e-4, "lesion"), (p_lesion + 1e-4, "normal")):
        (copy / "preprocessing.json").write_text(json.dumps({**saved, "threshold": threshold}))
        assert _predicted_row(copy, scan, tmp_path / f"{expected}.csv")["predicted_label"] == expected
        model = HybridCT3D.from_pretrained(copy)
        assert predict_files(model, scan)[0] == expected
        from bioattn.tasks.ct.explain import explain_ct

        assert explain_ct(str(copy), scan, faithfulness=False).summary["predicted"] == expected


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_the_baseline_is_a_run_directory_that_predict_and_explain_accept(run: tuple[Path, Path], tmp_path: Path) -> None:
    out, scan = run
    baseline = out / "baseline_resnet"
    assert json.loads((baseline / "config.json").read_text())["model_type"] == "ResNetCT3D"
    assert (baseline / "preprocessing.json").is_file()
    row = _predicted_row(baseline, scan, tmp_path / "b.csv")
    model = load_pretrained(baseline)
    assert float(row["p_lesion"]) == pytest.approx(float(predict_proba_files(model, scan)[0, 1]), abs=1e-5)
    assert cli_main(["explain", "ct", "--model", str(baseline), "--input", str(scan), "--out", str(tmp_path / "e"),
                     "--no-faithfulness"]) == 0
    assert (tmp_path / "e" / "attribution.nii.gz").is_file() and not (tmp_path / "e" / "rollout.nii.gz").exists()
    assert cli_main(["explain", "ct", "--model", str(baseline), "--input", str(scan), "--out", str(tmp_path / "r"),
                     "--method", "rollout"]) == 2  # no attention: a clear error


def test_summary_warnings_name_their_model_and_a_winning_baseline_prints_its_command(tmp_path: Path) -> None:
    from bioattn.tasks.ct.options import BASELINE_NAME, HYBRID_NAME
    from bioattn.tasks.ct.report import trust_sections

    stuck = {"warnings": ["warning: the kept model predicts one class (normal) for all 10 validation examples"],
             "confusion": {"classes": ["normal", "lesion"], "matrix": [[5, 0], [5, 0]]}, "threshold": 0.5,
             "split": "validation", "examples": 10}
    results = {"models": {HYBRID_NAME: {"val_auroc": 0.6, "trust": stuck},
                          BASELINE_NAME: {"val_auroc": 1.0, "trust": {**stuck, "warnings": []}}}}
    text = "\n".join(trust_sections(results, tmp_path / "R"))
    assert f"warning: [{HYBRID_NAME}] the kept model predicts one class" in text
    assert f"bioattn predict ct --model {tmp_path / 'R' / 'baseline_resnet'}" in text
