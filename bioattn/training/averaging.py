"""An exponential moving average of a model's weights during training, kept by torch's ``AveragedModel``."""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn
from torch.optim.swa_utils import AveragedModel

#: The decay after ``n`` updates is ``min(decay, (1 + n) / (EMA_WARMUP + n))``.
EMA_WARMUP = 10


def _ema_update(decay: float) -> Callable[[list[Tensor], list[Tensor], Tensor], None]:
    """``AveragedModel``'s ``multi_avg_fn``; integer buffers take the current value."""
    @torch.no_grad()
    def update(averaged: list[Tensor], current: list[Tensor], num_averaged: Tensor) -> None:
        n = float(num_averaged)
        weight = 1.0 - min(decay, (1.0 + n) / (EMA_WARMUP + n))
        for mean, value in zip(averaged, current, strict=True):
            if torch.is_floating_point(mean):
                mean.lerp_(value, weight)
            else:
                mean.copy_(value)

    return update


def weight_average(module: nn.Module, decay: float) -> AveragedModel:
    """An exponential moving average of ``module``; call ``update_parameters(module)`` after each step."""
    if not 0 < decay < 1:
        raise ValueError(f"decay must be between 0 and 1 (exclusive), got {decay}")
    return AveragedModel(module, multi_avg_fn=_ema_update(decay), use_buffers=True)
