"""What every task's training shares: timing a :class:`~bioattn.training.Trainer` run, counting parameters, and the
ensemble options (``--seeds``, ``--cv``) with the run directory layout they write."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from bioattn.errors import UserInputError
from bioattn.io import write_json, write_table
from bioattn.models.ensemble import ensemble_config
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


def member_dir_name(kind: str, index: int) -> str:
    """Folder of an ensemble member inside the ensemble's run directory: ``seed<S>`` or ``fold<K>``."""
    return f"{kind}{index}"


def save_ensemble(run_dir: Path, member_type: str, member_dirs: Sequence[str]) -> None:
    """Write the ``config.json`` that makes ``run_dir`` load as the ensemble of its ``member_dirs``."""
    write_json(run_dir / "config.json", ensemble_config(member_type, member_dirs))


OUT_OF_FOLD_FILE = "out_of_fold.csv"


def write_out_of_fold(
    run_dir: Path, records: Sequence[str], folds: np.ndarray, labels: np.ndarray, class_names: Sequence[str],
    probabilities: Mapping[str, np.ndarray],
) -> Path:
    """Write ``run_dir/out_of_fold.csv``: one row per example of a cross-validation, in the order of its pool.

    Columns: ``record`` (where the example came from), ``fold`` (1..K: the fold that held it out), ``label`` (class
    name), then for each model ``<prefix>p_<class>``, the probability given by the fold model that never saw the
    example. ``records``, ``folds`` ``(N,)`` and ``labels`` ``(N,)`` (class indices) are aligned; ``probabilities``
    maps a column prefix (``""`` for the attention model) to ``(N,)`` probabilities of class 1 (binary models) or
    ``(N, C)``.
    """
    columns = []
    for probs in probabilities.values():
        probs = np.asarray(probs, dtype=np.float64)
        columns.append(np.stack([1.0 - probs, probs], axis=1) if probs.ndim == 1 else probs)
    header = ["record", "fold", "label", *(f"{prefix}p_{name}" for prefix in probabilities for name in class_names)]
    rows = ([record, int(fold), class_names[int(label)], *np.concatenate([c[i] for c in columns]).tolist()]
            for i, (record, fold, label) in enumerate(zip(records, folds, labels)))
    return write_table(run_dir / OUT_OF_FOLD_FILE, header, rows)
