"""Optimizers (AdamW, Adam) and learning-rate schedules stepped once per optimizer step."""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from bioattn.training.config import TrainConfig


def build_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """AdamW (decoupled weight decay) or Adam (L2 penalty) over the trainable parameters."""
    params = [p for p in model.parameters() if p.requires_grad]
    if config.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    return torch.optim.Adam(params, lr=config.lr, weight_decay=config.weight_decay)


def lr_factor(config: TrainConfig, steps_per_epoch: int) -> Callable[[int], float]:
    """Multiplier of the peak lr at optimizer step ``step`` (0-based).

    Every schedule starts with a linear warm-up over ``warmup_steps``; then ``warmup_cosine`` decays to
    0 at the last step of ``max_epochs``, ``multistep`` multiplies by ``gamma`` at each epoch in
    ``milestones``, ``constant`` stays at 1.
    """
    total = max(1, config.max_epochs * steps_per_epoch)
    warmup = config.warmup_steps

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if config.schedule == "warmup_cosine":
            progress = min(1.0, (step - warmup) / max(1, total - warmup))
            return 0.5 * (1.0 + math.cos(math.pi * progress))
        if config.schedule == "multistep":
            epoch = step // steps_per_epoch
            return config.gamma ** sum(epoch >= m for m in config.milestones)
        return 1.0

    return factor


def build_scheduler(optimizer: torch.optim.Optimizer, config: TrainConfig, steps_per_epoch: int) -> torch.optim.lr_scheduler.LambdaLR:
    """A :class:`~torch.optim.lr_scheduler.LambdaLR` to be stepped after every optimizer step."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor(config, steps_per_epoch))
