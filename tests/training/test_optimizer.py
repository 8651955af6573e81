"""The optimizer: PyTorch's fused Adam/AdamW kernel where it exists, the same update as the loop over parameters."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from bioattn.training import TrainConfig
from bioattn.training.schedules import build_optimizer, can_fuse


def trained_copy(fused: bool | None, optimizer: str) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 2))
    opt = build_optimizer(model, TrainConfig(optimizer=optimizer, lr=1e-2, weight_decay=0.05), fused=fused)
    data = torch.randn(32, 8, generator=torch.Generator().manual_seed(1))
    for _ in range(5):
        opt.zero_grad()
        model(data).square().mean().backward()
        opt.step()
    return model, opt


@pytest.mark.parametrize("optimizer", ["adamw", "adam"])
def test_fused_by_default_on_the_cpu_and_the_same_update_as_the_loop(optimizer: str) -> None:
    fused, fused_opt = trained_copy(None, optimizer)
    looped, looped_opt = trained_copy(False, optimizer)
    assert fused_opt.defaults["fused"] is True  # torch >= 2.4 (constraints.txt) has the CPU kernel
    assert not looped_opt.defaults["fused"]
    for a, b in zip(fused.parameters(), looped.parameters()):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_can_fuse_only_floating_tensors_on_one_device_type() -> None:
    assert can_fuse([torch.zeros(2), torch.zeros(3)])
    assert not can_fuse([])
    assert not can_fuse([torch.zeros(2, dtype=torch.int64)])
    assert not can_fuse([torch.zeros(2), torch.zeros(2, device="meta")])
