"""Trust on a small data set: selection that cannot keep an untrained model, schedules that fit the run, batch sizes
capped by the data, and summaries that say how far the numbers go (confusion matrix, threshold, bootstrap interval,
warnings), end to end on tiny files the tests write."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from bioattn.cli import main as cli_main
from bioattn.errors import UserInputError
from bioattn.tasks.trust import baseline_warning, bootstrap_interval, trust_report
from bioattn.training import TrainConfig, Trainer
from bioattn.training.metrics_log import LOG_NAME, read_log
from bioattn.training.schedules import WARMUP_FRACTION, lr_factor
from tests.small_data_pilots import write_ct_pilot, write_promoter_pilot


def _data(n: int = 24) -> TensorDataset:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(n, 4, generator=generator)
    return TensorDataset(x, (x[:, 0] > 0).long())


def _loss(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    return nn.functional.cross_entropy(model(batch[0]), batch[1])


def _scripted(values: list[dict[str, float]]):
    """An ``evaluate`` returning ``values`` one evaluation after another, and the weights it saw each time."""
    seen: list[torch.Tensor] = []

    def evaluate(model: nn.Module) -> dict[str, float]:
        seen.append(model[0].weight.detach().clone())
        return values[len(seen) - 1]

    return evaluate, seen


def _fit(tmp_path: Path, values: list[dict[str, float]], **config) -> tuple[Trainer, object, list[torch.Tensor]]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 2))
    evaluate, seen = _scripted(values)
    options = dict(max_epochs=len(values), batch_size=8, lr=0.05, device="cpu", warmup_steps=0) | config
    trainer = Trainer(model, _data(), TrainConfig(**options), tmp_path / "run", loss_fn=_loss, evaluate=evaluate)
    return trainer, trainer.fit(), seen


# ------------------------------------------------------------------------------------------------ selection
@pytest.mark.slow  # over two seconds: two small training runs
def test_a_tie_on_the_monitored_score_keeps_the_epoch_with_the_lower_validation_loss(tmp_path: Path) -> None:
    """AUROC 1.0 at epoch 1 with loss 0.69 (an untrained model ranking by luck), 1.0 again at epoch 3 with loss 0.05:
    epoch 3 is kept, its weights are the model's."""
    values = [{"val_auroc": 1.0, "val_loss": 0.69}, {"val_auroc": 0.9, "val_loss": 0.3},
              {"val_auroc": 1.0, "val_loss": 0.05}, {"val_auroc": 1.0, "val_loss": 0.2}]
    trainer, result, seen = _fit(tmp_path, values, monitor="val_auroc")
    assert result.best_epoch == 3
    assert torch.equal(trainer.module[0].weight, seen[2])


def test_a_full_tie_keeps_the_later_epoch(tmp_path: Path) -> None:
    values = [{"accuracy": 0.5, "loss": 0.7}, {"accuracy": 0.5, "loss": 0.7}]
    _, result, _ = _fit(tmp_path, values, monitor="accuracy")
    assert result.best_epoch == 2


@pytest.mark.slow
def test_a_loss_monitor_minimises_whatever_the_mode_says(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    values = [{"val_loss": 0.9}, {"val_loss": 0.2}, {"val_loss": 0.5}]
    _, result, _ = _fit(tmp_path, values, monitor="val_loss", monitor_mode="max")
    assert result.best_epoch == 2
    assert "monitor 'val_loss' is a loss" in capsys.readouterr().err
    assert TrainConfig(monitor="dev_mcc", monitor_mode="min").maximize
    assert not TrainConfig(monitor="loss", monitor_mode="max").maximize


def test_an_unknown_monitor_needs_a_mode() -> None:
    with pytest.raises(UserInputError, match="neither a loss .* nor a known score"):
        TrainConfig(monitor="val_spearman")
    assert TrainConfig(monitor="val_spearman", monitor_mode="max").maximize


# ------------------------------------------------------------------------------------------------ schedules
def test_no_run_ends_in_warm_up(tmp_path: Path) -> None:
    """A warm-up of 100 steps in a run of 9: capped at a quarter; the last step's learning rate is past the peak."""
    values = [{"loss": 1.0}] * 3
    trainer, result, _ = _fit(tmp_path, values, monitor="loss", warmup_steps=100, schedule="warmup_cosine")
    lrs = [float(row["lr"]) for row in read_log(tmp_path / "run" / LOG_NAME) if row["phase"] == "train"]
    assert result.global_step == len(lrs) == 9
    peak = int(np.argmax(lrs))
    assert peak <= WARMUP_FRACTION * 9 and lrs[-1] < lrs[peak] and lrs[peak] == pytest.approx(0.05)
    assert all(a >= b for a, b in zip(lrs[peak:], lrs[peak + 1:]))  # decays from the peak to the last step


@pytest.mark.parametrize("steps_per_epoch, epochs", [(1, 1), (1, 15), (2, 15), (6, 12), (40, 15)])
def test_the_last_step_is_past_warm_up_for_every_length(steps_per_epoch: int, epochs: int) -> None:
    config = TrainConfig(max_epochs=epochs, warmup_steps=100, schedule="warmup_cosine")
    factor = lr_factor(config, steps_per_epoch)
    total = epochs * steps_per_epoch
    assert total == 1 or factor(total - 1) < max(factor(s) for s in range(total))


def test_a_short_run_says_its_warm_up_was_shortened(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    _fit(tmp_path, [{"loss": 1.0}] * 2, monitor="loss", warmup_steps=40)
    assert "warm-up is shortened from 40 to 1 steps" in capsys.readouterr().err


def test_a_batch_larger_than_the_training_set_is_reduced(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    trainer, result, _ = _fit(tmp_path, [{"loss": 1.0}] * 2, monitor="loss", batch_size=64)
    assert trainer.config.batch_size == 24 and trainer.micro_batch == 24 and result.global_step == 2
    assert "batch size 64 is larger than the training set (24 samples); using 24" in capsys.readouterr().err


def test_min_steps_raises_the_epochs_of_a_small_run(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    trainer, result, _ = _fit(tmp_path, [{"loss": 1.0}] * 4, monitor="loss", max_epochs=2, min_steps=10)
    assert trainer.config.max_epochs == 4 and result.global_step == 12  # 3 steps per epoch
    assert "training up to 4 epochs" in capsys.readouterr().err


def test_the_decision_threshold_moves_only_for_more_than_one_validation_example() -> None:
    """A model whose probabilities all sit below 0.5 gets the cut its validation split supports (midway between the
    classes); one that is wrong at 0.5 on a single volume keeps 0.5 (a cut fitted to one volume is noise); two
    wrong volumes move it."""
    from bioattn.metrics import decision_threshold

    labels = np.array([0] * 5 + [1] * 5)
    one_side = np.array([0.10, 0.12, 0.14, 0.16, 0.18, 0.30, 0.32, 0.34, 0.36, 0.38])
    assert decision_threshold(labels, one_side) == pytest.approx(0.24)
    one_wrong = np.array([0.10, 0.12, 0.14, 0.16, 0.18, 0.40, 0.62, 0.74, 0.86, 0.98])
    assert decision_threshold(labels, one_wrong) == 0.5
    two_wrong = np.array([0.10, 0.12, 0.14, 0.16, 0.18, 0.40, 0.45, 0.74, 0.86, 0.98])
    assert decision_threshold(labels, two_wrong) == pytest.approx(0.29)
    assert decision_threshold(np.array([1] * 4), np.full(4, 0.2)) == 0.5  # one class: nothing to choose


# ------------------------------------------------------------------------------------------------ trust report
def test_a_model_predicting_one_class_is_named() -> None:
    labels = np.array([0, 1] * 10)
    probs = np.where(labels == 1, 0.45, 0.40)  # ranks perfectly, predicts 0 everywhere
    report = trust_report(labels, probs, class_names=["normal", "lesion"], headline="auroc")
    text = "\n".join(report["warnings"])
    assert "predicts one class (normal) for all 20 validation examples" in text
    assert "accuracy 0.500 is at chance" in text and "AUROC is 1.000" in text
    assert report["confusion"]["matrix"] == [[10, 0], [10, 0]] and report["threshold"] == 0.5
    assert "chance" in text and "barely learned" not in text  # 0.40 and 0.45 are not near-uniform


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_probabilities_that_barely_left_chance_are_named() -> None:
    """A 40-volume CT pilot kept a model with p(lesion) 0.470–0.483: AUROC 1.000, loss ln 2; the summary says so."""
    labels = np.array([0, 1] * 10)
    report = trust_report(labels, np.where(labels == 1, 0.483, 0.470), class_names=["normal", "lesion"],
                          headline="auroc")
    assert any("within 0.030 of chance (0.500 for 2 classes): it has barely learned" in w for w in report["warnings"])
    three = np.full((6, 3), 1 / 3) + np.array([[0.01, -0.01, 0.0]] * 6)
    assert any("of chance (0.333 for 3 classes)" in w
               for w in trust_report(np.array([0, 1, 2] * 2), three)["warnings"])
    learned = trust_report(labels, np.where(labels == 1, 0.9, 0.1))
    assert not any("barely learned" in w for w in learned["warnings"])


def test_a_small_validation_set_gets_a_bootstrap_interval_and_a_cv_suggestion() -> None:
    rng = np.random.default_rng(0)
    labels = np.array([0, 1] * 20)
    probs = np.clip(labels * 0.4 + rng.random(40) * 0.6, 0, 1)
    report = trust_report(labels, probs, headline="mcc", cv_hint="--cv 5")
    low, high = report["interval"]
    assert low < report["value"] < high and high - low > 0.1
    assert any("--cv 5" in line and "bootstrap 95% interval" in line for line in report["warnings"])
    big = trust_report(np.array([0, 1] * 100), np.tile([0.2, 0.8], 100))
    assert big["interval"] is None and big["warnings"] == []


def test_bootstrap_interval_keeps_every_class_in_each_resample() -> None:
    labels = np.array([0] * 30 + [1] * 2)
    probs = np.r_[np.full(30, 0.2), [0.9, 0.1]]
    low, high = bootstrap_interval(labels, probs, "auroc")
    assert 0.0 <= low < high <= 1.0  # defined in every resample (no single-class resample)


def test_a_baseline_ahead_by_more_than_the_margin_is_named() -> None:
    line = baseline_warning("model", 0.80, {"k-mer": 0.95, "GC": 0.1}, "MCC×100", scale=100)
    assert line is not None and "'k-mer' beats model" in line and "95.0 against 80.0" in line
    assert baseline_warning("model", 0.94, {"k-mer": 0.95}, "MCC×100") is None


# ------------------------------------------------------------------------------------------------ end to end
@pytest.mark.slow
def test_promoter_summary_on_a_small_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    train, _ = write_promoter_pilot(tmp_path / "pilot", sequences=120, new=0, length=40)
    out = tmp_path / "run"
    assert cli_main(["train", "promoter", "--train", str(train), "--out", str(out), "--embed-dim", "16", "--heads", "2",
                     "--layers", "1", "--epochs", "1", "--min-steps", "4", "--batch-size", "64"]) == 0
    summary = (out / "summary.md").read_text()
    assert "confusion matrix on dev" in summary and "probability is >= 0.5" in summary
    assert "bootstrap 95% interval" in summary and "--cv 5" in summary
    trust = json.loads((out / "metrics.json").read_text())["trust"]
    assert sum(map(sum, trust["confusion"]["matrix"])) == trust["examples"] == 12
    assert "warm-up is shortened" in capsys.readouterr().err


@pytest.mark.slow
def test_ct_summary_on_a_few_nifti_volumes(tmp_path: Path) -> None:
    manifest, _ = write_ct_pilot(tmp_path / "pilot", volumes=12, new=0, shape=(16, 16, 8))
    out = tmp_path / "run"
    assert cli_main(["train", "ct", "--manifest", str(manifest), "--out", str(out), "--quick", "--size", "16",
                     "--baseline", "none"]) == 0
    summary = (out / "summary.md").read_text()
    assert "confusion matrix on validation" in summary and "bootstrap 95% interval" in summary
    metrics = json.loads((out / "metrics.json").read_text())
    trust = next(iter(metrics["models"].values()))["trust"]
    assert trust["confusion"]["classes"] == ["normal", "lesion"]  # lesion is the positive class (class 1)
    with open(tmp_path / "pilot" / "labels.csv") as handle:
        assert len(list(csv.DictReader(handle))) == 12


def test_cv_repeats_needs_cv_and_a_positive_count(tmp_path: Path) -> None:
    from bioattn.tasks.common import check_ensemble_options

    with pytest.raises(UserInputError, match="give --cv K too"):
        check_ensemble_options(None, None, 3)
    with pytest.raises(UserInputError, match="--cv-repeats must be >= 1"):
        check_ensemble_options(None, 5, 0)
    train, _ = write_promoter_pilot(tmp_path / "pilot", sequences=40, new=0, length=30)
    assert cli_main(["train", "promoter", "--train", str(train), "--out", str(tmp_path / "r"), "--cv-repeats", "2"]) == 2


@pytest.mark.slow
def test_promoter_cv_repeats_trains_r_times_k_fold_models(tmp_path: Path) -> None:
    train, _ = write_promoter_pilot(tmp_path / "pilot", sequences=60, new=0, length=30)
    out = tmp_path / "run"
    assert cli_main(["train", "promoter", "--train", str(train), "--out", str(out), "--quick", "--epochs", "1",
                     "--cv", "2", "--cv-repeats", "2"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["protocol"]["cv_repeats"] == 2 and metrics["protocol"]["cv_folds"] == 2
    assert sorted(p.name for p in out.glob("fold*")) == ["fold1", "fold2", "fold3", "fold4"]
    assert metrics["scores"]["PromoterClassifier (this run)"]["cv"]["mcc"]["n"] == 4
    assert metrics["trust"]["split"] == "out-of-fold" and metrics["trust"]["examples"] == 60
    with open(out / "out_of_fold.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 60 and {row["fold"] for row in rows} == {"1", "2"}
