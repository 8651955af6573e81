"""A single ``bioattn train ct`` run never keeps an attention model its own summary calls "barely learned" when the
same-run ResNet learned: :func:`choose_model` on validation numbers built by :func:`trust_report`, and one --quick run
with the condition forced, whose run directory then holds the ResNet (``predict ct --model RUN`` and ``explain ct``
use it with no flag), the attention model in ``RUN/hybrid_attention/``, the choice in metrics.json, run_config.json
and summary.md, with the command that uses the other model."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from bioattn.cli import main as cli_main
from bioattn.models import load_pretrained
from bioattn.tasks.ct import selection
from bioattn.tasks.ct.options import BASELINE_DIR, BASELINE_NAME, HYBRID_DIR, HYBRID_NAME
from bioattn.tasks.ct.report import trust_sections
from bioattn.tasks.ct.selection import ModelChoice, choose_model, not_learned
from bioattn.tasks.ct.volumes import predict_proba_files
from bioattn.tasks.trust import trust_report

LABELS = np.array([0, 1] * 5)


def _model(probs: np.ndarray, auroc: float, accuracy: float, threshold: float = 0.5) -> dict:
    return {"val_auroc": auroc, "val_accuracy": accuracy, "threshold": threshold,
            "trust": trust_report(LABELS, probs, threshold=threshold, class_names=["normal", "lesion"], headline="auroc")}


# every probability within 0.03 of 0.5, cut at a threshold placed between them (as on the training volumes)
BARELY = _model(np.where(LABELS == 1, 0.527, 0.523), 0.62, 0.6, threshold=0.525)
LEARNED = _model(np.where(LABELS == 1, 0.8, 0.2), 0.92, 0.9)


def test_the_trust_report_flags_what_its_warnings_say() -> None:
    assert BARELY["trust"]["barely_learned"] and not BARELY["trust"]["single_class"]
    assert any("barely learned" in line for line in BARELY["trust"]["warnings"])
    assert BARELY["trust"]["chance_distance"] == pytest.approx(0.027)
    assert not LEARNED["trust"]["barely_learned"] and not LEARNED["trust"]["single_class"]
    one_class = trust_report(LABELS, np.full(10, 0.9))
    assert one_class["single_class"] and not one_class["barely_learned"]


def test_a_barely_learned_attention_model_gives_way_to_a_baseline_that_learned() -> None:
    choice = choose_model({HYBRID_NAME: BARELY, BASELINE_NAME: LEARNED})
    assert choice.kept == BASELINE_NAME and choice.other == HYBRID_NAME and choice.baseline_kept
    assert "barely learned" in choice.reason and "0.027 of chance" in choice.reason
    assert "validation AUROC 0.620, accuracy 0.600" in choice.reason  # the attention model's numbers
    assert "validation AUROC 0.920, accuracy 0.900" in choice.reason  # the ResNet's
    run = Path("R")
    record = choice.to_dict(run)
    assert record["name"] == BASELINE_NAME and record["model_type"] == "ResNetCT3D" and record["criterion"] == "val_auroc"
    assert record["alternative"] == {"name": HYBRID_NAME, "model_type": "HybridCT3D", "path": HYBRID_DIR,
                                     "command": f"bioattn predict ct --model {run / HYBRID_DIR} --input SCAN "
                                                "--output predictions.csv"}
    assert record["scores"][HYBRID_NAME]["not_learned"] and not record["scores"][BASELINE_NAME]["not_learned"]
    statement = choice.statement(run)
    assert statement.startswith(f"kept model: {BASELINE_NAME}") and f"--model {run / HYBRID_DIR}" in statement


@pytest.mark.parametrize("hybrid, baseline", [(LEARNED, LEARNED), (LEARNED, BARELY), (BARELY, BARELY),
                                              (_model(np.where(LABELS == 1, 0.6, 0.4), 0.7, 0.7), LEARNED)])
def test_the_attention_model_stays_unless_it_did_not_learn_and_the_baseline_did(hybrid: dict, baseline: dict) -> None:
    choice = choose_model({HYBRID_NAME: hybrid, BASELINE_NAME: baseline})
    assert choice.kept == HYBRID_NAME and choice.other_dir(Path("R")) == Path("R") / BASELINE_DIR
    assert f"--model {Path('R') / BASELINE_DIR}" in choice.statement(Path("R"))


def test_one_class_or_chance_accuracy_is_not_learned_and_a_run_without_baseline_keeps_its_model() -> None:
    one_class = {"val_auroc": 0.9, "val_accuracy": 0.5, "trust": trust_report(LABELS, np.full(10, 0.9))}
    assert len(not_learned(one_class)) == 2  # one class for all, and at chance accuracy
    assert choose_model({HYBRID_NAME: one_class, BASELINE_NAME: LEARNED}).kept == BASELINE_NAME
    alone = choose_model({HYBRID_NAME: BARELY})
    assert alone.kept == HYBRID_NAME and alone.other is None and alone.to_dict(Path("R"))["alternative"] is None


def test_the_summary_drops_the_baseline_beats_warning_once_the_baseline_is_kept(tmp_path: Path) -> None:
    results = {"models": {HYBRID_NAME: {**BARELY, "trust": dict(BARELY["trust"])},
                          BASELINE_NAME: {**LEARNED, "trust": dict(LEARNED["trust"])}}}
    kept = choose_model(results["models"])
    assert not any("beats" in section for section in trust_sections(results, tmp_path, choice=kept))
    assert any("beats" in section for section in trust_sections(results, tmp_path))  # the hybrid kept: named


@pytest.mark.slow  # a --quick run with its baseline, then predict and explain on it: several seconds
def test_a_run_that_keeps_its_baseline_serves_it_from_the_run_directory(
        ct_own_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    real = selection.choose_model

    def forced(models: dict) -> ModelChoice:  # the attention model barely learned, its ResNet learned
        return real({HYBRID_NAME: {**models[HYBRID_NAME], **BARELY}, BASELINE_NAME: {**models[BASELINE_NAME], **LEARNED}})

    monkeypatch.setattr("bioattn.tasks.ct.train.choose_model", forced)
    out = tmp_path / "run"
    assert cli_main(["train", "ct", "--manifest", str(ct_own_data), "--out", str(out), "--quick", "--size", "16",
                     "--intensity-window", "0", "100"]) == 0
    printed = capsys.readouterr().out
    assert json.loads((out / "config.json").read_text())["model_type"] == "ResNetCT3D"
    assert json.loads((out / HYBRID_DIR / "config.json").read_text())["model_type"] == "HybridCT3D"
    assert json.loads((out / BASELINE_DIR / "config.json").read_text())["model_type"] == "ResNetCT3D"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["kept_model"]["name"] == BASELINE_NAME and metrics["headline"]["model"] == BASELINE_NAME
    assert metrics["kept_model"]["alternative"]["path"] == HYBRID_DIR
    assert json.loads((out / "run_config.json").read_text())["kept_model"] == metrics["kept_model"]
    command = f"bioattn predict ct --model {out / HYBRID_DIR} --input SCAN --output predictions.csv"
    assert f"kept model: {BASELINE_NAME}" in printed and command in printed
    assert command in (out / "summary.md").read_text()
    for folder, model in ((out, BASELINE_NAME), (out / HYBRID_DIR, HYBRID_NAME)):  # each with its own threshold
        assert json.loads((folder / "preprocessing.json").read_text())["threshold"] == metrics["models"][model]["threshold"]

    scan = ct_own_data.parent / "scans" / "scan01.nii.gz"
    rows = {}
    for name, model in (("kept", out), ("baseline", out / BASELINE_DIR)):
        assert cli_main(["predict", "ct", "--model", str(model), "--input", str(scan),
                         "--output", str(tmp_path / f"{name}.csv")]) == 0
        with open(tmp_path / f"{name}.csv") as handle:
            [rows[name]] = list(csv.DictReader(handle))
    assert rows["kept"]["p_blob"] == rows["baseline"]["p_blob"]
    assert float(rows["kept"]["p_blob"]) == pytest.approx(float(_p_blob(load_pretrained(out), scan)), abs=1e-5)
    assert cli_main(["explain", "ct", "--model", str(out), "--input", str(scan), "--out", str(tmp_path / "e"),
                     "--no-faithfulness"]) == 0
    summary = json.loads((tmp_path / "e" / "summary.json").read_text())
    assert summary["probabilities"]["blob"] == pytest.approx(float(rows["kept"]["p_blob"]), abs=1e-5)


def _p_blob(model, scan: Path) -> float:
    return float(predict_proba_files(model, scan)[0, model.class_names.index("blob")])
