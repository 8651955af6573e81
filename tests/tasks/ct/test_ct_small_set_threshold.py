"""A small CT training set: a binary model's decision threshold sits in the middle of the gap between its training
volumes' classes, not where a handful of validation volumes put it (on HU pilots of 38 training volumes the model
was unsure of its smallest lesions, 0.2-0.4, and 10 validation volumes could not place the cut); the validation
volumes then measure it."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from bioattn.metrics import decision_threshold, margin_threshold
from bioattn.models.ct_classifier import predict_probabilities
from bioattn.tasks.ct.data import CTData
from bioattn.tasks.ct.fit import thresholds_on_training_volumes, train_one
from bioattn.tasks.ct.options import PROTOCOLS
from bioattn.training import TrainConfig


def test_the_margin_threshold_is_the_middle_of_the_widest_gap_between_the_classes() -> None:
    labels = np.array([0] * 4 + [1] * 4)
    # separated below 0.5: the cut is midway between the highest negative (0.20) and the lowest positive (0.30)
    assert margin_threshold(labels, np.array([0.05, 0.10, 0.15, 0.20, 0.30, 0.35, 0.60, 0.90])) == pytest.approx(0.25)
    # one positive among the negatives: of the equally good cuts, the one with the widest gap (0.20 .. 0.60)
    mixed = np.array([0.05, 0.10, 0.15, 0.20, 0.12, 0.60, 0.70, 0.90])
    assert margin_threshold(labels, mixed) == pytest.approx(0.40)
    # one negative up among the positives does not pin the cut into their narrow gap (0.70 .. 0.71): a cut one
    # example worse takes the wide one (0.09 .. 0.70), as a pilot with one outlying training volume needed
    outlier = np.array([0.04, 0.06, 0.09, 0.70, 0.71, 0.77, 0.85, 0.89])
    assert margin_threshold(labels, outlier) == pytest.approx(0.395)
    # two such negatives are more than one example: the cut separates the classes
    two = np.array([0.04, 0.06, 0.69, 0.70, 0.72, 0.73, 0.74, 0.75])
    assert margin_threshold(labels, two) == pytest.approx(0.71)
    assert margin_threshold(np.ones(4, dtype=int), np.array([0.1, 0.2, 0.3, 0.4])) == 0.5  # one class
    assert margin_threshold(labels, np.full(8, 0.3)) == 0.5  # nothing separates
    assert margin_threshold(labels, np.array([0.9, 0.8, 0.7, 0.6, 0.1, 0.2, 0.3, 0.4])) == 0.5  # inverted: no cut helps


def test_only_small_training_sets_take_the_threshold_from_the_training_volumes() -> None:
    config = TrainConfig(batch_size=32, min_batches_per_epoch=4)
    assert thresholds_on_training_volumes(38, config)
    assert not thresholds_on_training_volumes(128, config)  # four full batches: the validation split is not tiny
    assert not thresholds_on_training_volumes(38, dataclasses.replace(config, min_batches_per_epoch=0))


def _volumes(means: list[float], seed: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    labels = torch.tensor([int(m > 0.5) for m in means])
    images = torch.tensor(means)[:, None, None, None, None] + 0.05 * torch.randn(len(means), 1, 4, 4, 4,
                                                                                  generator=generator)
    return TensorDataset(images, labels)


def _fit(tmp_path: Path, min_batches: int) -> tuple[dict, nn.Module, TensorDataset, TensorDataset]:
    """A model that ranks the volumes by mean intensity but keeps p(1) near 0.12 for class 0 and near 0.38 for class 1
    (a learning rate of 1e-12 leaves it as built); the validation volumes of class 0 sit at 0.20."""
    model = nn.Sequential(nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(1, 2))
    with torch.no_grad():
        model[2].weight.copy_(torch.tensor([[0.0], [1.5]]))
        model[2].bias.copy_(torch.tensor([0.0, -2.0]))
    train = _volumes([0.0, 1.0] * 6, 0)
    val = _volumes([0.4, 1.0] * 2, 1)  # its class 0 nearer the class 1: a validation cut would sit higher
    data = CTData(source="manifest", path=Path("labels.csv"), splits={"train": train, "val": val},
                  labels={"train": train.tensors[1].numpy(), "val": val.tensors[1].numpy()},
                  class_names=["normal", "lesion"], in_channels=1, augmented=lambda transform: train)
    config = TrainConfig(max_epochs=1, batch_size=32, min_batches_per_epoch=min_batches, lr=1e-12, device="cpu",
                         warmup_steps=0, monitor="val_auroc")
    metrics = train_one("hybrid", model, tmp_path / f"run{min_batches}", data, config, PROTOCOLS["tuned"],
                        augment=False)
    return metrics, model, train, val


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_a_small_set_takes_its_threshold_from_the_training_volumes_and_the_validation_split_measures_it(
    tmp_path: Path,
) -> None:
    metrics, model, train, val = _fit(tmp_path, min_batches=4)  # 12 volumes < 4 batches of 32
    train_probs = predict_probabilities(model, train, batch_size=32, flip_tta=True)[:, 1]
    val_probs = predict_probabilities(model, val, batch_size=32, flip_tta=True)[:, 1]
    assert train_probs.max() < 0.5  # every volume reads as class 0 at 0.5
    expected = margin_threshold(train.tensors[1].numpy(), train_probs)
    assert 0.2 < expected < 0.35 and metrics["threshold"] == pytest.approx(expected, abs=1e-9)
    # not where the validation split would put it
    assert decision_threshold(val.tensors[1].numpy(), val_probs) > expected + 0.02
    assert metrics["val_accuracy"] == 1.0  # measured at the threshold, where the validation volumes separate
    assert any("the middle of the widest gap between the 12 training volumes' probabilities" in line
               for line in metrics["trust"]["warnings"])
    assert metrics["trust"]["confusion"]["matrix"] == [[2, 0], [0, 2]]

    # a set of full batches: the validation split places the cut, and the accuracy reported is at 0.5
    metrics, model, _, val = _fit(tmp_path, min_batches=0)
    val_probs = predict_probabilities(model, val, batch_size=32, flip_tta=True)[:, 1]
    assert metrics["threshold"] == pytest.approx(decision_threshold(val.tensors[1].numpy(), val_probs), abs=1e-9)
    assert metrics["val_accuracy"] == 0.5
    assert not any("training volumes' probabilities" in line for line in metrics["trust"]["warnings"])
