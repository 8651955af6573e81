"""Optimizers (AdamW, Adam) and learning-rate schedules stepped once per optimizer step."""
from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch import nn

from bioattn.training.config import TrainConfig


def build_optimizer(model: nn.Module, config: TrainConfig, *, fused: bool | None = None) -> torch.optim.Optimizer:
    """AdamW or Adam over the trainable parameters; ``fused`` (default: :func:`can_fuse`): one fused kernel."""
    params = [p for p in model.parameters() if p.requires_grad]
    options: dict[str, Any] = {"lr": config.lr, "weight_decay": config.weight_decay}
    if can_fuse(params) if fused is None else fused:
        options["fused"] = True
    return torch.optim.AdamW(params, **options) if config.optimizer == "adamw" else torch.optim.Adam(params, **options)


def can_fuse(params: list[torch.Tensor]) -> bool:
    """Whether PyTorch has a fused Adam/AdamW kernel for ``params`` (floating point, all on CUDA or the CPU)."""
    kinds = {p.device.type for p in params}
    if not params or len(kinds) != 1 or not all(p.is_floating_point() for p in params):
        return False
    if kinds == {"cuda"}:
        return True
    major, minor = (int(part) for part in torch.__version__.split(".")[:2])
    return kinds == {"cpu"} and (major, minor) >= (2, 4)


#: The longest warm-up as a fraction of a run's optimizer steps.
WARMUP_FRACTION = 0.25


def total_steps(config: TrainConfig, steps_per_epoch: int) -> int:
    """Optimizer steps of a complete run (at least 1)."""
    return max(1, config.max_epochs * steps_per_epoch)


def effective_warmup(config: TrainConfig, steps_per_epoch: int) -> int:
    """``config.warmup_steps``, capped at :data:`WARMUP_FRACTION` of :func:`total_steps`."""
    return min(config.warmup_steps, int(WARMUP_FRACTION * total_steps(config, steps_per_epoch)))


def schedule_notes(config: TrainConfig, steps_per_epoch: int) -> list[str]:
    """One ``note:`` line per way the run is shorter than its schedule assumes."""
    total, warmup = total_steps(config, steps_per_epoch), effective_warmup(config, steps_per_epoch)
    notes = []
    if warmup < config.warmup_steps:
        notes.append(f"note: this run has {total} optimizer steps ({config.max_epochs} epochs of {steps_per_epoch}); "
                     f"the learning-rate warm-up is shortened from {config.warmup_steps} to {warmup} steps "
                     f"({WARMUP_FRACTION:.0%} of the run)")
    if config.schedule == "multistep":
        late = [m for m in config.milestones if m >= config.max_epochs]
        if late:
            notes.append(f"note: learning-rate milestones at epoch {', '.join(map(str, late))} lie past the last "
                         f"epoch ({config.max_epochs}); they never apply")
    return notes


def lr_factor(config: TrainConfig, steps_per_epoch: int) -> Callable[[int], float]:
    """Multiplier of the peak lr at optimizer step ``step``: warm-up, then the schedule."""
    total = total_steps(config, steps_per_epoch)
    warmup = effective_warmup(config, steps_per_epoch)

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


def build_scheduler(optimizer: torch.optim.Optimizer, config: TrainConfig,
                    steps_per_epoch: int) -> torch.optim.lr_scheduler.LambdaLR:
    """A :class:`~torch.optim.lr_scheduler.LambdaLR` to be stepped after every optimizer step."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor(config, steps_per_epoch))
