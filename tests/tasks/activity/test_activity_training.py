"""Training an activity model end to end on synthetic files where activity = count of a planted motif: the model
learns it, the same-run ridge baseline is reported beside it, metrics.json has its keys, out_of_fold.csv its
rows, 'bioattn predict activity' writes one value per target; on ~40 sequences the run keeps a model that
learned something or says clearly that it did not."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from bioattn.cli import main
from bioattn.tasks.activity.scores import (
    BLEND_NAME,
    DEEP_NAME,
    MEAN_NAME,
    MOTIF_RIDGE_NAME,
    RIDGE_NAME,
    baseline_predictions,
    regression_metrics,
)
from bioattn.tasks.driver import check_metrics

MOTIF = "TGACTCA"
FIVE, THREE = "AGGACCGGATCAACT", "CATTGCGTGAACCGA"
SMALL = ["--channels", "16", "--embed-dim", "16", "--heads", "2", "--layers", "1", "--stages", "1",
         "--kernel", "7", "--batch-size", "32", "--lr", "3e-3", "--shift", "0", "--dropout", "0", "--device", "cpu"]


def planted(n: int, seed: int, length: int = 40, noise: float = 0.1) -> tuple[list[str], np.ndarray]:
    """Random sequences with 0-3 copies of MOTIF; activity = the number of copies + noise."""
    rng = np.random.default_rng(seed)
    sequences, values = [], []
    for _ in range(n):
        sequence = list(rng.choice(list("ACGT"), length))
        copies = int(rng.integers(0, 4))
        for slot in rng.choice(length // 10, copies, replace=False):
            sequence[slot * 10 + 1 : slot * 10 + 1 + len(MOTIF)] = MOTIF
        text = "".join(sequence)
        sequences.append(text)
        values.append(text.count(MOTIF) + noise * rng.normal())
    return sequences, np.array(values)


def write_tsv(path: Path, sequences: list[str], values: np.ndarray, flanks: bool = True) -> Path:
    with open(path, "w") as handle:
        handle.write("id\tseq\tmean_value\n")
        for i, (s, v) in enumerate(zip(sequences, values)):
            handle.write(f"r{i}\t{FIVE + s + THREE if flanks else s}\t{v:.4f}\n")
    return path


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_ridge_baseline_learns_a_planted_motif() -> None:
    train, train_values = planted(300, seed=0)
    test, test_values = planted(100, seed=1)
    predictions = baseline_predictions(train, train_values[:, None], test)
    assert set(predictions) == {RIDGE_NAME, MEAN_NAME}
    assert regression_metrics(test_values[:, None], predictions[RIDGE_NAME], ["v"])["pearson"] > 0.5
    assert regression_metrics(test_values[:, None], predictions[MEAN_NAME], ["v"])["pearson"] == 0.0


@pytest.mark.slow
def test_train_then_predict_end_to_end(tmp_path: Path) -> None:
    train = write_tsv(tmp_path / "train.tsv", *planted(400, seed=0))
    dev_sequences, dev_values = planted(100, seed=1)
    dev = write_tsv(tmp_path / "dev.tsv", dev_sequences, dev_values)
    run = tmp_path / "run"
    assert main(["train", "activity", "--train", str(train), "--dev", str(dev), "--epochs", "12", "--out", str(run),
                 *SMALL]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    check_metrics(metrics)
    assert {"model", "baselines", "members", "flanks", "strand"} <= set(metrics)
    assert metrics["task"] == "activity" and metrics["kind"] == "regression" and metrics["protocol"]["name"] == "holdout"
    assert metrics["headline"]["metric"] == "pearson" and metrics["headline"]["split"] == "held_out"
    assert metrics["headline"]["value"] == metrics["model"]["pearson"]["mean"]
    assert metrics["target_names"] == ["mean_value"] and metrics["flanks"] == [FIVE, THREE]
    assert metrics["model"]["pearson"]["mean"] > 0.5, metrics["model"]
    assert set(metrics["baselines"]) == {RIDGE_NAME, MEAN_NAME, MOTIF_RIDGE_NAME, DEEP_NAME, BLEND_NAME}
    assert "k-mer (k=1..6) ridge regression" in (run / "summary.md").read_text()
    config = json.loads((run / "config.json").read_text())
    assert config["model_type"] == "ActivityRegressor" and config["flanks"] == [FIVE, THREE]
    # predict accepts the sequences with or without the flanks and reproduces the run's number
    without = write_tsv(tmp_path / "bare.tsv", dev_sequences, dev_values, flanks=False)
    outputs = {}
    for name, source in (("with", dev), ("without", without)):
        outputs[name] = tmp_path / f"{name}.csv"
        assert main(["predict", "activity", "--model", str(run), "--input", str(source),
                     "--output", str(outputs[name])]) == 0
    rows = list(csv.DictReader(open(outputs["with"])))
    assert [r["id"] for r in rows] == [f"r{i}" for i in range(100)] and set(rows[0]) == {"id", "mean_value"}
    assert outputs["with"].read_text() == outputs["without"].read_text()
    predicted = np.array([float(r["mean_value"]) for r in rows])
    assert np.corrcoef(predicted, dev_values)[0, 1] == pytest.approx(metrics["model"]["pearson"]["mean"], abs=1e-4)


@pytest.mark.slow
def test_cross_validation_writes_out_of_fold_rows(tmp_path: Path) -> None:
    train = write_tsv(tmp_path / "train.tsv", *planted(120, seed=3))
    run = tmp_path / "run"
    assert main(["train", "activity", "--train", str(train), "--cv", "3", "--quick", "--out", str(run),
                 "--no-baselines", "--device", "cpu"]) == 0
    rows = list(csv.DictReader(open(run / "out_of_fold.csv")))
    assert len(rows) == 120 and {r["fold"] for r in rows} == {"1", "2", "3"}
    assert set(rows[0]) == {"record", "fold", "target", "measured", "prediction", "ridge_prediction"}
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["model"]["pearson"]["n"] == 3 and len(metrics["members"]) == 3
    assert json.loads((run / "config.json").read_text())["members"] == ["fold1", "fold2", "fold3"]
    out = tmp_path / "values.tsv"
    assert main(["predict", "activity", "--model", str(run), "--input", str(train), "--output", str(out)]) == 0
    assert out.read_text().splitlines()[0] == "id\tmean_value"


@pytest.mark.slow
def test_forty_sequences_learn_or_say_why_not(tmp_path: Path) -> None:
    sequences, values = planted(80, seed=5, noise=0.0)
    train = write_tsv(tmp_path / "train.tsv", sequences[:40], values[:40])
    dev = write_tsv(tmp_path / "dev.tsv", sequences[40:], values[40:])
    run = tmp_path / "run"
    assert main(["train", "activity", "--train", str(train), "--dev", str(dev), "--out", str(run), *SMALL]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    (member,) = metrics["members"]
    assert member["training"]["sizes"] == {"fit": 36, "validation": 4}  # early stopping on 4 held-back sequences
    assert member["training"]["config"]["min_steps"] == 300  # the schedule is scaled up for a small set
    # 4 validation rows cannot choose a blend weight: the deep model is saved alone, and the summary says why
    assert member["training"]["deep_weight"] == 1.0 and "too few to choose a blend" in member["training"]["blend_note"]
    assert "too few to choose a blend" in (run / "summary.md").read_text()
    assert "motifs" not in json.loads((run / "config.json").read_text())
    assert metrics["model"]["pearson"]["mean"] > 0.3, metrics["model"]  # it learned the motif from 36 sequences


def test_summary_warns_when_nothing_was_learned_or_a_baseline_wins() -> None:
    from bioattn.tasks.activity.run import warnings_of

    member = {"member": "fold1", "training": {"validation": {"val_pearson": 0.01}, "sizes": {"validation": 4}}}
    model = {"pearson": {"mean": 0.40, "sd": 0.0, "n": 1}}
    warnings = warnings_of(model, {RIDGE_NAME: {"pearson": {"mean": 0.45, "sd": 0.0, "n": 1}}}, [member])
    assert "fold1: the model learned nothing usable (validation Pearson 0.010 on 4 sequences)" in warnings[0]
    assert "reaches Pearson 0.450, at least the model's 0.400: prefer it" in warnings[1]
    member["training"]["validation"]["val_pearson"] = 0.6
    assert warnings_of(model, {RIDGE_NAME: {"pearson": {"mean": 0.3, "sd": 0.0, "n": 1}}}, [member]) == []


def test_the_parts_the_run_chose_among_are_not_flagged_against_the_saved_model() -> None:
    from bioattn.tasks.activity.run import warnings_of

    member = {"member": "fold1", "training": {"validation": {"val_pearson": 0.6}, "sizes": {"validation": 4}}}
    model = {"pearson": {"mean": 0.40, "sd": 0.0, "n": 1}}
    candidates = (BLEND_NAME, DEEP_NAME, RIDGE_NAME)
    assert warnings_of(model, {DEEP_NAME: {"pearson": {"mean": 0.40, "sd": 0.0, "n": 1}}}, [member], candidates) == []
    # the run itself keeps the best of the blend and its parts: nothing to rerun
    assert warnings_of(model, {DEEP_NAME: {"pearson": {"mean": 0.45, "sd": 0.0, "n": 1}}}, [member], candidates) == []
    # a baseline the run did not choose among is still named
    assert "prefer it" in warnings_of(model, {MOTIF_RIDGE_NAME: {"pearson": {"mean": 0.45, "sd": 0.0, "n": 1}}},
                                      [member], candidates)[0]
