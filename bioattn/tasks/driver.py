"""The shared driver of every task's training run and the ``metrics.json`` schema."""
from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Generic, Iterable, Mapping, Sequence, TypeVar

import numpy as np

from bioattn import plugins
from bioattn.distributed import is_main_process
from bioattn.io import write_json, write_table, write_text
from bioattn.models.ensemble import ensemble_config
from bioattn.progress import progress_bar

#: Version of the ``metrics.json`` schema.
METRICS_SCHEMA_VERSION = 2

T = TypeVar("T")

#: ``metrics.json`` ``protocol.name``s; ``fit_all`` trains on every row and scores nothing held out.
PROTOCOL_NAMES = ("holdout", "seeds", "cv", "fit_all")


@dataclass(frozen=True)
class RunProtocol:
    """What a run trains: one model per seed, ``cv`` folds (``cv_repeats`` shuffles), or one model."""

    seeds: tuple[int, ...] | None = None
    cv: int | None = None
    cv_repeats: int = 1
    description: str = ""
    name_override: str | None = None

    @classmethod
    def of(cls, options: Any, description: str = "", name: str | None = None) -> "RunProtocol":
        seeds = getattr(options, "seeds", None)
        return cls(tuple(seeds) if seeds else None, getattr(options, "cv", None), getattr(options, "cv_repeats", 1),
                   description, name)

    @property
    def name(self) -> str:
        return self.name_override or ("cv" if self.cv else "seeds" if self.seeds else "holdout")

    def to_dict(self, **extra: Any) -> dict[str, Any]:
        """``metrics.json``'s ``protocol``, with task-specific ``extra`` keys."""
        return {"name": self.name, "description": self.description, "seeds": list(self.seeds) if self.seeds else None,
                "cv_folds": self.cv, "cv_repeats": self.cv_repeats if self.cv else None, **extra}


def member_dir_name(kind: str, index: int) -> str:
    """An ensemble member's folder: ``seed<S>`` or ``fold<K>``."""
    return f"{kind}{index}"


def save_ensemble(run_dir: Path, member_type: str, member_dirs: Sequence[str]) -> None:
    """Write the ``config.json`` that makes ``run_dir`` load as the ensemble of its ``member_dirs``."""
    write_json(run_dir / "config.json", ensemble_config(member_type, member_dirs))


OUT_OF_FOLD_FILE = "out_of_fold.csv"


def write_out_of_fold(run_dir: Path, records: Sequence[str], folds: np.ndarray, labels: np.ndarray,
                      class_names: Sequence[str], probabilities: Mapping[str, np.ndarray]) -> Path:
    """Write ``run_dir/out_of_fold.csv``; ``probabilities``: column prefix → ``(N,)`` or ``(N, C)``."""
    columns = []
    for probs in probabilities.values():
        probs = np.asarray(probs, dtype=np.float64)
        columns.append(np.stack([1.0 - probs, probs], axis=1) if probs.ndim == 1 else probs)
    header = ["record", "fold", "label", *(f"{prefix}p_{name}" for prefix in probabilities for name in class_names)]
    rows = ([record, int(fold), class_names[int(label)], *np.concatenate([c[i] for c in columns]).tolist()]
            for i, (record, fold, label) in enumerate(zip(records, folds, labels)))
    return write_table(run_dir / OUT_OF_FOLD_FILE, header, rows)


@dataclass(frozen=True)
class Member:
    """One model of a run (``alone``: the run's only model, saved in the run directory itself)."""

    kind: str
    index: int
    run_dir: Path | None
    number: int
    total: int
    train_index: np.ndarray | None = None
    held_out_index: np.ndarray | None = None
    alone: bool = False

    @property
    def dir_name(self) -> str:
        return member_dir_name(self.kind, self.index)


def seed_members(run_dir: Path, seeds: Sequence[int] | None, default_seed: int) -> list[Member]:
    """One member per seed in ``run_dir/seed<S>``; without ``seeds`` one model in ``run_dir`` itself."""
    if seeds is None:
        return [Member("seed", default_seed, run_dir, 1, 1, alone=True)]
    return [Member("seed", seed, run_dir / member_dir_name("seed", seed), number, len(seeds))
            for number, seed in enumerate(seeds, start=1)]


_Folds = Callable[[int, int], Iterable[tuple[np.ndarray, np.ndarray]]]


def repeated_folds(k: int, repeats: int, seed: int, folds: _Folds) -> list[tuple[np.ndarray, np.ndarray]]:
    """``repeats`` × ``k`` ``(train_index, held_out_index)`` pairs, repeat r being ``folds(k, seed + r)``."""
    return [fold for r in range(repeats) for fold in folds(k, seed + r)]


def cv_members(run_dir: Path | None, splits: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[Member]:
    """One member per split in ``run_dir/fold<k>`` (k from 1; ``run_dir`` ``None``: not saved)."""
    return [Member("fold", k, None if run_dir is None else run_dir / member_dir_name("fold", k), k, len(splits),
                   np.asarray(train), np.asarray(held_out))
            for k, (train, held_out) in enumerate(splits, start=1)]


def train_members(members: Sequence[Member], train_member: Callable[[Member], T]) -> list[T]:
    """``train_member(member)`` for each member in order, each announced on stderr."""
    results = []
    folds = members and members[0].kind == "fold"
    iterator = progress_bar(members, desc="cross-validation", unit="fold", disable=not is_main_process()) \
        if folds else members
    for member in iterator:
        if member.kind == "fold":
            saved_in = "" if member.run_dir is None else f" → {member.run_dir}"
            print(f"fold {member.index} of {member.total}: train {len(member.train_index)}, held out "  # type: ignore[arg-type]
                  f"{len(member.held_out_index)}{saved_in}", file=sys.stderr)  # type: ignore[arg-type]
        elif not member.alone:
            print(f"seed {member.index} ({member.number} of {member.total}) → {member.run_dir}", file=sys.stderr,
                  flush=True)
        results.append(train_member(member))
    return results


def save_members(run_dir: Path, member_type: str, members: Sequence[Member]) -> None:
    """Write the ensemble ``config.json`` of ``members`` (nothing for a run's only model)."""
    if not (len(members) == 1 and members[0].alone):
        save_ensemble(run_dir, member_type, [member.dir_name for member in members])


class OutOfFold:
    """Each pooled example's out-of-fold probabilities per model name (mean over repeats)."""

    def __init__(self, size: int, k: int, repeats: int) -> None:
        self.k, self.repeats = k, repeats
        self.fold_of = np.zeros(size, dtype=np.int64)
        self.probabilities: dict[str, np.ndarray] = {}

    def add(self, member: Member, probabilities: Mapping[str, np.ndarray]) -> None:
        """Add ``member``'s held-out probabilities ``(n,)`` or ``(n, C)`` by model name."""
        held_out = member.held_out_index
        if member.index <= self.k:
            self.fold_of[held_out] = member.index
        for name, probs in probabilities.items():
            pooled = self.probabilities.setdefault(name, np.zeros((len(self.fold_of), *np.shape(probs)[1:])))
            pooled[held_out] += probs / self.repeats


def plan_members(run_dir: Path, protocol: RunProtocol, seed: int, folds: _Folds | None = None) -> list[Member]:
    """The members of a run: K × R folds (:func:`repeated_folds`) or one per seed (:func:`seed_members`)."""
    if protocol.cv:
        if folds is None:
            raise ValueError("a cross-validation needs the task's fold splitter")
        return cv_members(run_dir, repeated_folds(protocol.cv, protocol.cv_repeats, seed, folds))
    return seed_members(run_dir, protocol.seeds, seed)


@dataclass
class MembersRun(Generic[T]):
    """What :func:`run_members` returns; ``out_of_fold`` only for a cross-validation."""

    members: list[Member]
    results: list[T]
    out_of_fold: OutOfFold | None = None


def run_members(run_dir: Path, members: Sequence[Member], fit: Callable[[Member], T], *, member_type: str | None = None,
                held_out: Callable[[Member, T], Mapping[str, np.ndarray]] | None = None,
                pool_size: int | None = None) -> MembersRun[T]:
    """``fit(member)`` for every member in order, pooling a fold's held-out predictions."""
    out_of_fold = None
    if members and members[0].kind == "fold" and held_out is not None:
        if pool_size is None:
            raise ValueError("pool_size is needed to pool the held-out predictions")
        repeats = max(1, round(sum(len(m.held_out_index) for m in members) / pool_size))  # type: ignore[arg-type]
        out_of_fold = OutOfFold(pool_size, len(members) // repeats, repeats)

    def one(member: Member) -> T:
        result = fit(member)
        if out_of_fold is not None and held_out is not None and is_main_process():
            out_of_fold.add(member, held_out(member, result))
        return result

    results = train_members(members, one)
    if member_type is not None and is_main_process():
        save_members(run_dir, member_type, members)
    return MembersRun(list(members), results, out_of_fold)


#: Keys every ``metrics.json`` has beside the task's own.
METRICS_KEYS = ("schema_version", "task", "kind", "dataset", "protocol", "splits", "headline", "scores")
#: The splits a headline is read from, in order of preference.
HEADLINE_SPLITS = ("test", "oof", "held_out", "cv", "dev", "val")


def headline(task: Task, scores: Mapping[str, Mapping[str, Mapping[str, Any]]], split: str | None = None,
             model: str | None = None) -> dict[str, Any]:
    """``metrics.json``'s ``headline`` of ``model`` on ``split`` (defaults: the first scored)."""
    model = model or next(iter(scores), None)
    by_split = scores.get(model, {}) if model else {}
    if split is None:
        split = next((s for s in HEADLINE_SPLITS if s in by_split), next(iter(by_split), None))
    value = by_split.get(split, {}).get(task.headline_metric) if split else None
    mean, sd = (value.get("mean"), value.get("sd")) if isinstance(value, Mapping) else (value, None)
    return {"metric": task.headline_metric, "model": model, "split": split,
            "value": None if mean is None else float(mean), "sd": None if sd is None else float(sd)}


def metrics_document(task: Task | str, *, dataset: str | None, protocol: Mapping[str, Any], splits: Mapping[str, int],
                     scores: Mapping[str, Mapping[str, Mapping[str, Any]]], class_names: Sequence[str] | None = None,
                     target_names: Sequence[str] | None = None, headline_split: str | None = None,
                     **extra: Any) -> dict[str, Any]:
    """A ``metrics.json`` in the shared schema, the task's own keys (``extra``) last."""
    if isinstance(task, str):
        module_name, _, attribute = plugins.task_target(task).partition(":")
        task = getattr(importlib.import_module(module_name), attribute)
    document: dict[str, Any] = {"schema_version": METRICS_SCHEMA_VERSION, "task": task.name, "kind": task.kind,
                                "dataset": dataset, "protocol": dict(protocol), "splits": dict(splits)}
    if class_names is not None:
        document["class_names"] = list(class_names)
    if target_names is not None:
        document["target_names"] = list(target_names)
    document["headline"] = headline(task, scores, headline_split)
    document["scores"] = {name: dict(by_split) for name, by_split in scores.items()}
    clash = set(extra) & set(document)
    if clash:
        raise ValueError(f"task keys {sorted(clash)} clash with the shared metrics.json keys")
    return {**document, **extra}


def check_metrics(metrics: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` naming what ``metrics`` lacks of the shared schema."""
    missing = [key for key in METRICS_KEYS if key not in metrics]
    if metrics.get("kind") == "classification" and "class_names" not in metrics:
        missing.append("class_names")
    if metrics.get("kind") == "regression" and "target_names" not in metrics:
        missing.append("target_names")
    if missing:
        raise ValueError(f"metrics.json lacks {', '.join(missing)}")
    if metrics["schema_version"] != METRICS_SCHEMA_VERSION:
        raise ValueError(f"metrics.json schema {metrics['schema_version']}, expected {METRICS_SCHEMA_VERSION}")
    protocol = metrics["protocol"]
    if not isinstance(protocol, Mapping) or protocol.get("name") not in PROTOCOL_NAMES:
        raise ValueError(f"metrics.json protocol must be a mapping whose name is one of {', '.join(PROTOCOL_NAMES)}")
    for key in ("metric", "model", "split", "value", "sd"):
        if key not in metrics["headline"]:
            raise ValueError(f"metrics.json headline lacks {key}")


def write_run_report(run_dir: Path, metrics: Mapping[str, Any], summary: str) -> None:
    """Write ``run_dir/metrics.json`` (checked first) and ``run_dir/summary.md``."""
    check_metrics(metrics)
    write_json(run_dir / "metrics.json", metrics)
    write_text(run_dir / "summary.md", summary if summary.endswith("\n") else summary + "\n")


def run_task(task: Task, options: Any, config: Any = None, **inputs: Any) -> dict[str, Any]:
    """``task.run``: a task's whole training run through its hooks; ``metrics.json``'s document (``{}`` off rank 0)."""
    options, data = task.prepare(options, config, **inputs)
    protocol = task.protocol(options, data)
    members = task.members(options, data, protocol)
    folds = bool(members) and members[0].kind == "fold"
    pool = data.pool if data.pool is not None else data.train
    run = run_members(options.out, members, lambda member: task.fit_member(options, data, member),
                      member_type=task.member_type,
                      held_out=lambda member, fitted: task.held_out(options, data, member, fitted),
                      pool_size=len(pool) if folds else None)
    if not is_main_process():
        return {}
    metrics, summary = task.report(options, data, protocol, run)
    if folds:
        task.write_out_of_fold(options, data, run, metrics)
    if metrics is None:  # several run directories, each with its own metrics.json
        return {}
    write_run_report(options.out, metrics, summary)
    return metrics
