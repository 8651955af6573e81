"""What every task's training shares: timing a :class:`~bioattn.training.Trainer` run and counting parameters."""
from __future__ import annotations

import time
from typing import Any

import torch
from torch import nn

from bioattn.training import FitResult, Trainer


def count_parameters(model: nn.Module) -> int:
    """Number of parameters of ``model`` (trainable or not)."""
    return sum(p.numel() for p in model.parameters())


def fit_timed(trainer: Trainer) -> tuple[FitResult, dict[str, Any]]:
    """Run ``trainer.fit()``; return its result and a JSON-ready summary of the run.

    Summary keys: ``parameters``, ``best_epoch``, ``epochs_run``, ``optimizer_steps``, ``stop_reason``,
    ``train_wall_minutes_this_invocation``, ``train_cpu_minutes_this_invocation``, ``torch_threads``.
    """
    wall, cpu = time.monotonic(), time.process_time()
    result = trainer.fit()
    return result, {
        "parameters": count_parameters(trainer.module),
        "best_epoch": result.best_epoch,
        "epochs_run": result.history[-1]["epoch"] if result.history else 0,
        "optimizer_steps": result.global_step,
        "stop_reason": result.stop_reason,
        "train_wall_minutes_this_invocation": round((time.monotonic() - wall) / 60, 2),
        "train_cpu_minutes_this_invocation": round((time.process_time() - cpu) / 60, 2),
        "torch_threads": torch.get_num_threads(),
    }
