"""What every task's training shares: timing a :class:`~bioattn.training.Trainer` run, counting parameters, the
options every task has (:class:`TaskOptions`: the run directory, ``--seeds``, ``--cv``, model size) and their
checks, and recipe lookup. The protocols (holdout, seeds, cross-validation, ensembles) and the ``metrics.json``
schema are the driver's, :mod:`bioattn.tasks.driver`."""
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
    """The attention kernel a run trains and evaluates with: ``config.attention_backend``, where ``"auto"`` means
    ``"math"`` for bf16 autocast on a CPU (torch's fused CPU attention is slow in bf16 backward; a training step is
    faster with math) and for ``config.deterministic`` on a GPU (the fused kernels' backward adds from many threads
    in no fixed order), the process-wide choice otherwise. An unknown name is a :class:`UserInputError`."""
    if config.attention_backend not in BACKENDS:
        raise UserInputError(f"attention_backend must be one of {', '.join(BACKENDS)}; got {config.attention_backend!r}")
    if config.attention_backend != "auto":
        return config.attention_backend
    bf16_on_cpu = config.precision == "bf16" and device.type == "cpu"
    deterministic_on_gpu = config.deterministic and device.type == "cuda"
    return "math" if bf16_on_cpu or deterministic_on_gpu else "auto"


def fit_timed(trainer: Trainer) -> tuple[FitResult, dict[str, Any]]:
    """Run ``trainer.fit()`` with the run's attention kernel (:func:`training_attention_backend`, restored
    afterwards); return its result and a JSON-ready summary of the run.

    Summary keys: ``parameters``, ``best_epoch``, ``epochs_run``, ``optimizer_steps``, ``stop_reason``,
    ``train_wall_minutes_this_invocation``, ``train_cpu_minutes_this_invocation``, ``torch_threads``.
    """
    backend = training_attention_backend(trainer.config, trainer.device)
    wall, cpu = time.monotonic(), time.process_time()
    with contextlib.nullcontext() if backend == "auto" else use_backend(backend):  # type: ignore[arg-type]
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


def check_ensemble_options(seeds: Sequence[int] | None, cv: int | None, cv_repeats: int = 1) -> None:
    """``--seeds`` (distinct, at least one) and ``--cv K`` (K >= 2) are valid and not combined; ``--cv-repeats R``
    (R >= 1) needs ``--cv`` when R > 1."""
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
    """The checks every axial-model option set shares: each field in ``positive`` >= 1, ``embed_dim`` divisible by
    ``heads``, ``dropout`` in [0, 1), not both ``resume`` and ``overwrite`` (a ``UserInputError`` naming the flag)."""
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
    """What the options of every training task share (keyword-only; each task's options class adds its own).

    ``out``: the run directory; ``data_root``: the folder of the bundled benchmarks (default: ``BIOATTN_DATA_ROOT``,
    see :func:`~bioattn.data.resolve_data_root`); ``quick``: a smoke test (tiny model, few rows, short epochs);
    ``seeds``: one model per seed on the same split, saved as one ensemble; ``cv``: K-fold cross-validation, the
    K fold models saved as the ensemble; ``cv_repeats``: repeat it with R shuffles (R × K fold models);
    ``resume`` / ``overwrite``: what to do with an existing ``out``. Model size: ``embed_dim`` (the width),
    ``heads``, ``layers`` and ``dropout`` (``None``: the task's default); each task's options set their own
    defaults. Checked by :func:`check_ensemble_options` and :meth:`check_run_options`.
    """

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
        """The shared checks: the ensemble options (:func:`check_ensemble_options`)."""
        check_ensemble_options(self.seeds, self.cv, self.cv_repeats)



R = TypeVar("R", bound="Recipe")


@dataclass(frozen=True)
class Recipe:
    """A task's defaults, the one way every task declares them: ``train_config`` (the
    :class:`~bioattn.training.TrainConfig` its runs start from; flags and ``--config`` files replace its fields) and
    a ``description`` for run summaries. Each task subclasses it for the defaults of its own options (the promoter
    pretraining recipe, the CT protocols' loss and augmentation) and keeps its recipes in one mapping read through
    :func:`recipe_for`."""

    train_config: TrainConfig
    description: str = ""


def recipe_for(recipes: Mapping[Any, R], name: Any, *, flag: str, default: Any = None) -> R:
    """``recipes[name]``; a name that is not there falls back to ``recipes[default]`` when ``default`` is one of
    them, else is a :class:`UserInputError` naming ``flag`` and the choices."""
    if name in recipes:
        return recipes[name]
    if default in recipes:
        return recipes[default]
    choices = ", ".join(str(key) for key in recipes if key is not None)
    raise UserInputError(f"unknown {flag} {name!r}; choose one of {choices}")
