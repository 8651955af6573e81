"""Ensembles as first-class models: ``--seeds`` and ``--cv K`` on synthetic data written here; the ensemble run
directory loads, predicts and reproduces its reported numbers like a single model."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from bioattn.cli import main as bioattn_main
from bioattn.data.dna import encode
from bioattn.metrics import classification_metrics
from bioattn.models import load_pretrained
from bioattn.models.promoter import PromoterClassifier
from bioattn.tasks.promoter.train import MODEL_NAME
from bioattn.models.ensemble import Ensemble, average_over_members, ensemble_members
from bioattn.tasks.driver import check_metrics
from tests.helpers.promoter_records import TINY, make_records, read_rows, write_csv


# ------------------------------------------------------------------------------------------ the module
def _tiny_promoter(seed: int, num_classes: int = 2) -> PromoterClassifier:
    torch.manual_seed(seed)
    return PromoterClassifier(max_len=32, embed_dim=16, num_heads=2, num_layers=1, num_classes=num_classes).eval()


@pytest.mark.parametrize("num_classes", [2, 3])
def test_ensemble_probabilities_are_the_mean_of_the_members(num_classes):
    members = [_tiny_promoter(seed, num_classes) for seed in range(3)]
    ensemble = Ensemble(members).eval()
    ids = torch.randint(1, 5, (4, 20))
    with torch.no_grad():
        got = ensemble.proba_from_ids(ids, rc_average=False)
        expected = torch.stack([m.proba_from_ids(ids, rc_average=False) for m in members]).mean(dim=0)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)
    tokens = [np.random.default_rng(i).integers(1, 5, size=n) for i, n in enumerate((10, 20, 32))]
    np.testing.assert_allclose(ensemble.predict_tokens(tokens, rc_average=False),
                               np.mean([m.predict_tokens(tokens, rc_average=False) for m in members], axis=0), atol=1e-6)


def test_ensemble_exposes_settings_but_no_single_submodule():
    ensemble = Ensemble([_tiny_promoter(0), _tiny_promoter(1)])
    assert (ensemble.max_len, ensemble.class_names, ensemble.binary) == (32, ["0", "1"], True)
    with pytest.raises(AttributeError, match="each of its 2 members"):
        ensemble.embedding
    assert ensemble_members(ensemble) == list(ensemble.members)
    single = _tiny_promoter(0)
    assert ensemble_members(single) == [single]
    assert average_over_members(ensemble, lambda m: torch.ones(2) * (1 if m is ensemble.members[0] else 3)).tolist() == [2, 2]


def test_ensemble_refuses_mixed_member_classes():
    with pytest.raises(ValueError, match="share one class"):
        Ensemble([_tiny_promoter(0), torch.nn.Linear(2, 2)])


# ------------------------------------------------------------------------------------ promoter --seeds
@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("ensemble_data")
    return {"train": write_csv(folder / "train.csv", make_records(("neg", "pos"), 300, seed=11)),
            "test": write_csv(folder / "test.csv", make_records(("neg", "pos"), 80, seed=12))}


@pytest.fixture(scope="module")
def seeds_run(data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("seeds") / "run"
    assert bioattn_main(["train", "promoter", "--out", str(out), *TINY, "--train", str(data["train"]),
                         "--test", str(data["test"]), "--seeds", "3", "5"]) == 0
    return out


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_seeds_train_one_run_per_seed_and_report_mean_sd_and_ensemble(seeds_run: Path):
    metrics = json.loads((seeds_run / "metrics.json").read_text())
    assert sorted(p.name for p in seeds_run.iterdir() if p.is_dir()) == ["seed3", "seed5"]
    for seed in ("seed3", "seed5"):  # each member is a complete run directory
        assert (seeds_run / seed / "model.safetensors").is_file() and (seeds_run / seed / "train_log.csv").is_file()
    assert set(metrics["seeds"]) == {"3", "5"}
    members = metrics["scores"]["PromoterClassifier, mean ± sd over seeds (this run)"]["test"]
    per_seed = [metrics["seeds"][s]["test"]["mcc"] for s in ("3", "5")]
    assert members["mcc"]["n"] == 2 and members["mcc"]["mean"] == pytest.approx(np.mean(per_seed))
    assert members["mcc"]["sd"] == pytest.approx(np.std(per_seed, ddof=1))
    ensemble_scores = metrics["scores"]["ensemble of 2 seeds (this run)"]["test"]
    assert metrics["metrics"]["test_mcc"] == ensemble_scores["mcc"]  # the headline is the saved ensemble's
    assert metrics["protocol"]["name"] == "seeds" and metrics["protocol"]["seeds"] == [3, 5]
    assert "one model per seed (3, 5)" in metrics["protocol"]["description"]
    assert metrics["headline"] == {"metric": "mcc", "model": "ensemble of 2 seeds (this run)", "split": "test",
                                   "value": ensemble_scores["mcc"], "sd": None}
    summary = (seeds_run / "summary.md").read_text()
    assert "| ensemble of 2 seeds (this run) |" in summary and " ± " in summary


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_seed_ensemble_loads_by_path_and_predict_reproduces_its_numbers(seeds_run: Path, data, tmp_path):
    ensemble = load_pretrained(seeds_run)
    assert isinstance(ensemble, Ensemble) and len(ensemble.members) == 2
    assert isinstance(load_pretrained(seeds_run, expect=PromoterClassifier), Ensemble)
    out = tmp_path / "pred.csv"
    assert bioattn_main(["predict", "promoter", "--model", str(seeds_run), "--input", str(data["test"]),
                         "--output", str(out)]) == 0
    rows = read_rows(out)
    probs = np.array([float(r["promoter_probability"]) for r in rows])
    labels = np.array([r["label"] == "pos" for r in read_rows(data["test"])], dtype=int)
    metrics = json.loads((seeds_run / "metrics.json").read_text())["metrics"]
    assert classification_metrics(labels, probs)["mcc"] == pytest.approx(metrics["test_mcc"], abs=1e-9)
    single = PromoterClassifier.from_pretrained(seeds_run / "seed3")
    tokens = [encode(r["sequence"]) for r in read_rows(data["test"])]
    assert not np.allclose(probs, single.predict_tokens(tokens), atol=1e-4)  # not just the first member


@pytest.mark.slow
def test_explain_accepts_a_seed_ensemble(seeds_run: Path, data, tmp_path):
    out = tmp_path / "explain"
    assert bioattn_main(["explain", "promoter", "--model", str(seeds_run), "--input", str(data["test"]),
                         "--out", str(out), "--max-rows", "10", "--plot-sequences", "1"]) == 0
    assert len(read_rows(out / "predictions.tsv", "\t")) == 10


# --------------------------------------------------------------------------------------- promoter --cv
@pytest.mark.slow
def test_cv_gives_out_of_fold_metrics_over_every_sequence_once_and_a_fold_ensemble(data, tmp_path):
    out = tmp_path / "cv"
    assert bioattn_main(["train", "promoter", "--out", str(out), *TINY, "--train", str(data["train"]), "--cv", "3"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    check_metrics(metrics)
    assert metrics["protocol"]["cv_folds"] == 3 and sorted(p.name for p in out.iterdir() if p.is_dir()) == ["fold1", "fold2", "fold3"]
    assert metrics["splits"] == {"pool": 300} and sum(metrics["class_counts"].values()) == 300
    model_scores = metrics["scores"][MODEL_NAME]
    assert model_scores["cv"]["mcc"]["n"] == 3 and "mcc" in model_scores["oof"]
    assert metrics["metrics"]["oof_mcc"] == model_scores["oof"]["mcc"] and metrics["metrics"]["oof_mcc"] > 0.3
    assert "3-fold stratified CV" in metrics["protocol"]["description"]
    assert metrics["headline"]["split"] == "oof" and metrics["headline"]["value"] == model_scores["oof"]["mcc"]
    rows = read_rows(out / "out_of_fold.csv", ",")
    assert len(rows) == 300 and {row["fold"] for row in rows} == {"1", "2", "3"}
    assert all(str(data["train"]) in row["record"] for row in rows)
    names = [column[2:] for column in rows[0] if column.startswith("p_")]  # class order of the model
    assert names == ["neg", "pos"]
    labels = np.array([names.index(row["label"]) for row in rows])
    probs = np.array([[float(row[f"p_{name}"]) for name in names] for row in rows])
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-9)
    # the file holds exactly the pooled predictions the out-of-fold metrics were computed from
    assert classification_metrics(labels, probs[:, 1])["mcc"] == pytest.approx(model_scores["oof"]["mcc"], abs=1e-12)
    ensemble = load_pretrained(out)
    assert isinstance(ensemble, Ensemble) and len(ensemble.members) == 3


@pytest.mark.parametrize("flags, message", [
    (["--seeds", "0", "1", "--cv", "3"], "not both"),
    (["--seeds", "1", "1"], "distinct seeds"),
    (["--cv", "1"], "at least 2 folds"),
])
def test_bad_ensemble_options_are_user_errors(data, tmp_path, capsys, flags, message):
    assert bioattn_main(["train", "promoter", "--out", str(tmp_path / "x"), *TINY, "--train", str(data["train"]),
                         *flags]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


# ------------------------------------------------------------------------------------------- CT
@pytest.fixture(scope="module")
def ct_manifest(tmp_path_factory) -> Path:
    """16 NIfTI masks (8 per class) and a labels.csv without splits."""
    from tests.helpers.ct_volumes import noisy_mask, write_csv_rows, write_nifti

    root = tmp_path_factory.mktemp("ct_ensemble_data")
    rng = np.random.default_rng(3)
    rows = []
    for index in range(16):
        write_nifti(root / f"scan{index:02d}.nii.gz", noisy_mask(rng, index % 2 == 1))
        rows.append([f"scan{index:02d}.nii.gz", "blob" if index % 2 else "none"])
    return write_csv_rows(root / "labels.csv", ["image", "label"], rows)


def _train_ct(manifest: Path, out: Path, *flags: str) -> dict:
    from tests.helpers.ct_volumes import TRAIN_FLAGS

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert bioattn_main(["train", "ct", "--manifest", str(manifest), "--out", str(out), *TRAIN_FLAGS,
                             "--baseline", "resnet", *flags]) == 0
    finally:
        torch.set_num_threads(threads)
    return json.loads((out / "metrics.json").read_text())


@pytest.mark.slow
def test_ct_cv_pools_out_of_fold_predictions_and_saves_a_fold_ensemble(ct_manifest, tmp_path):
    from bioattn.models.hybrid_ct import HybridCT3D
    from bioattn.tasks.ct.options import BASELINE_NAME, DEPTH_BASELINE_NAME, HYBRID_NAME

    out = tmp_path / "cv"
    metrics = _train_ct(ct_manifest, out, "--cv", "3")
    check_metrics(metrics)
    assert metrics["protocol"]["cv_folds"] == 3 and metrics["headline"]["split"] == "oof"
    assert metrics["headline"]["value"] == metrics["scores"][HYBRID_NAME]["oof"]["auroc"]
    held_out = []
    rows = read_rows(out / "out_of_fold.csv", ",")
    for fold in (1, 2, 3):
        record = json.loads((out / f"fold{fold}" / "fold_metrics.json").read_text())
        held_out += record["held_out_index"]
        assert {i for i, row in enumerate(rows) if row["fold"] == str(fold)} == set(record["held_out_index"])
        assert not set(record["train_index"]) & set(record["held_out_index"])
        assert (out / f"fold{fold}" / "baseline_resnet" / "model.safetensors").is_file()
    pool = sum(metrics["splits"].values())
    assert sorted(held_out) == list(range(pool))  # every volume held out exactly once
    assert len(rows) == pool and all(Path(row["record"]).name.startswith("scan") for row in rows)
    names = metrics["class_names"]
    labels = np.array([names.index(row["label"]) for row in rows])
    for name, prefix in ((HYBRID_NAME, ""), (BASELINE_NAME, "baseline_"), (DEPTH_BASELINE_NAME, "depth_")):
        assert 0.0 <= metrics["oof"][name]["oof_auroc"] <= 1.0
        assert metrics["cv"][name]["val_auroc"]["n"] == 3
        probs = np.array([[float(row[f"{prefix}p_{name}"]) for name in names] for row in rows])
        assert classification_metrics(labels, probs)["auroc"] == pytest.approx(metrics["oof"][name]["oof_auroc"])
    # binary masks: one number, the mean depth inside the mask, separates the 5³ cubes from the sparse noise
    assert metrics["oof"][DEPTH_BASELINE_NAME]["oof_auroc"] > 0.95
    ensemble = load_pretrained(out, expect=HybridCT3D)
    assert isinstance(ensemble, Ensemble) and len(ensemble.members) == 3
    assert (out / "preprocessing.json").is_file()


@pytest.mark.slow
def test_ct_seed_ensemble_predicts_the_mean_of_its_members(ct_manifest, tmp_path):
    from bioattn.models.hybrid_ct import HybridCT3D
    from bioattn.tasks.ct.options import HYBRID_NAME

    out = tmp_path / "seeds"
    metrics = _train_ct(ct_manifest, out, "--seeds", "0", "1", "--baseline", "none")
    assert set(metrics["seeds"]) == {"0", "1"} and metrics["members"][HYBRID_NAME]["val_auroc"]["n"] == 2
    assert "val_auroc" in metrics["ensemble"][HYBRID_NAME]
    rows = {}
    for run in (out, out / "seed0", out / "seed1"):
        target = tmp_path / f"{run.name}.csv"
        assert bioattn_main(["predict", "ct", "--model", str(run), "--input", str(ct_manifest), "--output", str(target)]) == 0
        rows[run.name] = np.array([[float(r["p_blob"]), float(r["p_none"])] for r in read_rows(target)])
    np.testing.assert_allclose(rows["seeds"], (rows["seed0"] + rows["seed1"]) / 2, atol=1e-5)
    overlay = tmp_path / "attention"
    assert bioattn_main(["predict", "ct", "--model", str(out), "--input", str(ct_manifest.parent / "scan01.nii.gz"),
                         "--output", str(tmp_path / "one.csv"), "--attention-map", str(overlay) + ".nii.gz"]) == 0
    assert Path(str(overlay) + ".nii.gz").is_file()
    assert isinstance(load_pretrained(out, expect=HybridCT3D), Ensemble)
