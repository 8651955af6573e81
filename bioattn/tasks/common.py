"""What every task's training shares: timing a :class:`~bioattn.training.Trainer` run, counting parameters, the
ensemble options (``--seeds``, ``--cv``) with the run directory layout they write, and the one driver that trains
the members of a seed or cross-validation ensemble (:func:`seed_members`, :func:`cv_members`,
:func:`train_members`, :class:`OutOfFold`), used by the promoter, CT and MSA tasks alike."""
from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

import numpy as np
import torch
from torch import nn

from bioattn.attention import BACKENDS, use_backend
from bioattn.errors import UserInputError
from bioattn.io import write_json, write_table
from bioattn.models.ensemble import ensemble_config
from bioattn.progress import progress_bar
from bioattn.training import FitResult, TrainConfig, Trainer
from bioattn.distributed import is_main_process

T = TypeVar("T")


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


# ------------------------------------------------------------------------------------------ ensemble driver
@dataclass(frozen=True)
class Member:
    """One model of a run: ``kind`` ``"seed"`` or ``"fold"``, ``index`` its seed or fold number (1..K*R),
    ``run_dir`` its complete run directory, ``number`` of ``total`` its place in the run; a fold also carries the
    indices into the cross-validation pool it trains on (``train_index``) and predicts (``held_out_index``).
    ``alone``: the run's only model, trained in the run directory itself (no ensemble)."""

    kind: str
    index: int
    run_dir: Path
    number: int
    total: int
    train_index: np.ndarray | None = None
    held_out_index: np.ndarray | None = None
    alone: bool = False

    @property
    def dir_name(self) -> str:
        """``seed<S>`` or ``fold<K>`` (:func:`member_dir_name`)."""
        return member_dir_name(self.kind, self.index)


def seed_members(run_dir: Path, seeds: Sequence[int] | None, default_seed: int) -> list[Member]:
    """One member per seed of ``seeds`` in ``run_dir/seed<S>``; without ``seeds`` the run's one model, seed
    ``default_seed``, in ``run_dir`` itself."""
    if seeds is None:
        return [Member("seed", default_seed, run_dir, 1, 1, alone=True)]
    return [Member("seed", seed, run_dir / member_dir_name("seed", seed), number, len(seeds))
            for number, seed in enumerate(seeds, start=1)]


def repeated_folds(
    k: int, repeats: int, seed: int, folds: Callable[[int, int], Iterable[tuple[np.ndarray, np.ndarray]]],
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``repeats`` × ``k`` ``(train_index, held_out_index)`` pairs: repeat r (0-based) is ``folds(k, seed + r)``,
    its folds numbered r*K+1 .. (r+1)*K."""
    return [fold for r in range(repeats) for fold in folds(k, seed + r)]


def cv_members(run_dir: Path, splits: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[Member]:
    """One member per ``(train_index, held_out_index)`` of ``splits`` in ``run_dir/fold<k>`` (k from 1)."""
    return [Member("fold", k, run_dir / member_dir_name("fold", k), k, len(splits), np.asarray(train),
                   np.asarray(held_out))
            for k, (train, held_out) in enumerate(splits, start=1)]


def train_members(members: Sequence[Member], train_member: Callable[[Member], T]) -> list[T]:
    """``train_member(member)`` for each member in order (each announced on stderr unless it is the run's only
    model; a progress line per fold); their results in the same order."""
    results = []
    folds = members and members[0].kind == "fold"
    iterator = progress_bar(members, desc="cross-validation", unit="fold", disable=not is_main_process()) \
        if folds else members
    for member in iterator:
        if member.kind == "fold":
            print(f"fold {member.index} of {member.total}: train {len(member.train_index)}, held out "  # type: ignore[arg-type]
                  f"{len(member.held_out_index)} → {member.run_dir}", file=sys.stderr)  # type: ignore[arg-type]
        elif not member.alone:
            print(f"seed {member.index} ({member.number} of {member.total}) → {member.run_dir}", file=sys.stderr,
                  flush=True)
        results.append(train_member(member))
    return results


def save_members(run_dir: Path, member_type: str, members: Sequence[Member]) -> None:
    """Write the ``config.json`` that makes ``run_dir`` load as the ensemble of ``members`` (nothing for a run's
    only model, which is saved in ``run_dir`` itself)."""
    if not (len(members) == 1 and members[0].alone):
        save_ensemble(run_dir, member_type, [member.dir_name for member in members])


class OutOfFold:
    """Each pooled example's out-of-fold probabilities, per model name: the mean over the repeats of the
    probability given by the fold model that held it out; :attr:`fold_of` the fold (1..K) of the first repeat
    that held each one out. ``size``: examples in the pool, ``k`` folds per repeat, ``repeats`` repeats."""

    def __init__(self, size: int, k: int, repeats: int) -> None:
        self.k, self.repeats = k, repeats
        self.fold_of = np.zeros(size, dtype=np.int64)
        self.probabilities: dict[str, np.ndarray] = {}

    def add(self, member: Member, probabilities: Mapping[str, np.ndarray]) -> None:
        """Add the held-out probabilities ``(n,)`` or ``(n, C)`` of ``member``'s models (by name)."""
        held_out = member.held_out_index
        if member.index <= self.k:
            self.fold_of[held_out] = member.index
        for name, probs in probabilities.items():
            pooled = self.probabilities.setdefault(name, np.zeros((len(self.fold_of), *np.shape(probs)[1:])))
            pooled[held_out] += probs / self.repeats
