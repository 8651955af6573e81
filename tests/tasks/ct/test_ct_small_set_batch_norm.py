"""A small CT training set: the kept weights carry batch-normalisation statistics of their own, re-estimated on the
training volumes before each evaluation, not running averages that lag behind fast-moving weights (with them the
evaluation-mode model put every pilot volume on one side of 0.5 while its batches trained well)."""
from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.optim.swa_utils import update_bn
from torch.utils.data import DataLoader, TensorDataset

from bioattn.tasks.ct.data import CTData
from bioattn.tasks.ct.fit import recalibrates_batch_norm, train_one
from bioattn.tasks.ct.options import PROTOCOLS
from bioattn.training import TrainConfig


def _volumes(count: int, seed: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    labels = torch.arange(count) % 2
    images = torch.randn(count, 1, 8, 8, 8, generator=generator) + 3.0 * labels[:, None, None, None, None]
    return TensorDataset(images, labels)


def _fit(tmp_path: Path, min_batches: int) -> tuple[nn.Sequential, TensorDataset]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv3d(1, 4, 3, padding=1), nn.BatchNorm3d(4), nn.ReLU(), nn.AdaptiveAvgPool3d(1),
                          nn.Flatten(), nn.Linear(4, 2))
    train, val = _volumes(12, 0), _volumes(4, 1)
    data = CTData(source="manifest", path=Path("labels.csv"), splits={"train": train, "val": val},
                  labels={"train": train.tensors[1].numpy(), "val": val.tensors[1].numpy()}, class_names=["a", "b"],
                  in_channels=1, augmented=lambda transform: train)
    config = TrainConfig(max_epochs=3, batch_size=32, min_batches_per_epoch=min_batches, lr=0.05, device="cpu",
                         warmup_steps=0, monitor="val_auroc")
    train_one("hybrid", model, tmp_path / f"run{min_batches}", data, config, PROTOCOLS["tuned"], augment=False)
    return model, train


@pytest.mark.slow
def test_the_kept_weights_of_a_small_set_carry_statistics_of_their_own(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    model, train = _fit(tmp_path, min_batches=4)  # 12 volumes < 4 batches of 32: batches of 3
    err = capsys.readouterr().err
    assert "batch normalisation's statistics are re-estimated on the 12 training volumes before each evaluation" in err
    expected = copy.deepcopy(model)
    update_bn(DataLoader(train, batch_size=3, shuffle=False), expected)
    assert torch.allclose(model[1].running_mean, expected[1].running_mean, atol=1e-6)
    assert torch.allclose(model[1].running_var, expected[1].running_var, atol=1e-6)

    # a training set of full batches keeps the running averages of training (which do not match)
    plain, train = _fit(tmp_path, min_batches=0)
    assert "re-estimated" not in capsys.readouterr().err
    expected = copy.deepcopy(plain)
    update_bn(DataLoader(train, batch_size=12, shuffle=False), expected)
    assert not torch.allclose(plain[1].running_mean, expected[1].running_mean, atol=1e-3)


def test_only_small_sets_of_models_with_batch_norm_are_recalibrated() -> None:
    config = TrainConfig(batch_size=32, min_batches_per_epoch=4)
    with_norm = nn.Sequential(nn.Conv3d(1, 2, 1), nn.BatchNorm3d(2))
    assert recalibrates_batch_norm(with_norm, 38, config)
    assert not recalibrates_batch_norm(with_norm, 128, config)  # four full batches: the trainer's own statistics
    assert not recalibrates_batch_norm(nn.Sequential(nn.Conv3d(1, 2, 1), nn.InstanceNorm3d(2)), 38, config)
    assert not recalibrates_batch_norm(with_norm, 38, dataclasses.replace(config, min_batches_per_epoch=0))
