"""What every task's training shares: timed fits, the shared options and their checks, recipe lookup."""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence, TypeVar

import torch
from torch import nn

from bioattn.attention import BACKENDS, use_backend
from bioattn.errors import UserInputError
from bioattn.training import FitResult, TrainConfig, Trainer


def count_parameters(model: nn.Module) -> int:
    """Number of parameters of ``model`` (trainable or not)."""
    return sum(p.numel() for p in model.parameters())


def training_attention_backend(config: TrainConfig, device: torch.device) -> str:
    """The attention kernel a run trains with (``auto``: math for bf16 on a CPU or deterministic)."""
    if config.attention_backend not in BACKENDS:
        raise UserInputError(f"attention_backend must be one of {', '.join(BACKENDS)}; got {config.attention_backend!r}")
    if config.attention_backend != "auto":
        return config.attention_backend
    bf16_on_cpu = config.precision == "bf16" and device.type == "cpu"
    deterministic_on_gpu = config.deterministic and device.type == "cuda"
    return "math" if bf16_on_cpu or deterministic_on_gpu else "auto"


def fit_timed(trainer: Trainer) -> tuple[FitResult, dict[str, Any]]:
    """``trainer.fit()`` with the run's attention kernel: its result and a JSON-ready summary."""
    backend = training_attention_backend(trainer.config, trainer.device)
    wall, cpu = time.monotonic(), time.process_time()
    with contextlib.nullcontext() if backend == "auto" else use_backend(backend):  # type: ignore[arg-type]
        result = trainer.fit()
    return result, {"parameters": count_parameters(trainer.module), "best_epoch": result.best_epoch,
                    "epochs_run": result.history[-1]["epoch"] if result.history else 0,
                    "optimizer_steps": result.global_step, "stop_reason": result.stop_reason,
                    "train_wall_minutes_this_invocation": round((time.monotonic() - wall) / 60, 2),
                    "train_cpu_minutes_this_invocation": round((time.process_time() - cpu) / 60, 2),
                    "torch_threads": torch.get_num_threads()}


def check_ensemble_options(seeds: Sequence[int] | None, cv: int | None, cv_repeats: int = 1) -> None:
    """Check ``--seeds`` (distinct), ``--cv K`` (K >= 2; not both) and ``--cv-repeats R`` (R > 1 needs ``--cv``)."""
    if cv_repeats < 1:
        raise UserInputError(f"--cv-repeats must be >= 1, got {cv_repeats}")
    if cv_repeats > 1 and cv is None:
        raise UserInputError("--cv-repeats repeats a cross-validation: give --cv K too")
    if seeds is not None and cv is not None:
        raise UserInputError("choose --seeds (one model per seed on the same split) or --cv K (one model per fold), not both")
    if seeds is not None and (len(seeds) == 0 or len(set(seeds)) != len(seeds)):
        raise UserInputError(f"--seeds needs one or more distinct seeds, got {list(seeds)}")
    if cv is not None and cv < 2:
        raise UserInputError(f"--cv needs at least 2 folds, got {cv}")


def check_model_options(options: Any, positive: Sequence[str]) -> None:
    """The model option checks every task shares."""
    for name in positive:
        if getattr(options, name) < 1:
            raise UserInputError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(options, name)}")
    if options.embed_dim % options.heads:
        raise UserInputError(f"--embed-dim ({options.embed_dim}) must be divisible by --heads ({options.heads})")
    if not 0 <= options.dropout < 1:
        raise UserInputError(f"--dropout must be in [0, 1), got {options.dropout}")
    if options.resume and options.overwrite:
        raise UserInputError("choose either --resume or --overwrite, not both")


@dataclass(frozen=True, kw_only=True)
class TaskOptions:
    """The options every training task shares (keyword-only)."""

    out: Path
    data_root: str | Path | None = None
    quick: bool = False
    seeds: tuple[int, ...] | None = None
    cv: int | None = None
    cv_repeats: int = 1
    resume: bool = False
    overwrite: bool = False
    embed_dim: int = 64
    heads: int = 4
    layers: int = 2
    dropout: float | None = None

    def check_run_options(self) -> None:
        check_ensemble_options(self.seeds, self.cv, self.cv_repeats)


R = TypeVar("R", bound="Recipe")


@dataclass(frozen=True)
class Recipe:
    """A task's defaults: the ``train_config`` its runs start from and a ``description``."""

    train_config: TrainConfig
    description: str = ""


def recipe_for(recipes: Mapping[Any, R], name: Any, *, flag: str, default: Any = None) -> R:
    """``recipes[name]``, else ``recipes[default]``, else a :class:`UserInputError` naming ``flag``."""
    if name in recipes:
        return recipes[name]
    if default in recipes:
        return recipes[default]
    choices = ", ".join(str(key) for key in recipes if key is not None)
    raise UserInputError(f"unknown {flag} {name!r}; choose one of {choices}")
