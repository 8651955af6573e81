"""The shared driver: how every task's training run is organised, written once.

A run trains one model (``holdout``), one model per seed on the same split (``seeds``) or one model per fold of a
K-fold cross-validation, optionally repeated with R shuffles (``cv``); the models of a ``seeds`` or ``cv`` run
are saved in ``seed<S>/`` / ``fold<k>/`` and the run directory loads as their ensemble. The task supplies what
is its own through the hooks of :class:`~bioattn.tasks.base.Task` (load the data, fit and save one member,
score, predict a split, fit the same-run baselines); the driver supplies the rest:

- :class:`RunProtocol` (``holdout`` / ``seeds`` / ``cv`` from the options, as recorded in ``metrics.json``);
- :func:`plan_members` (the members of a run and their folders), :func:`run_members` (train them in order with
  one progress line, collect each fold's held-out predictions into :class:`OutOfFold`, write the ensemble's
  ``config.json``), :func:`write_out_of_fold` (``out_of_fold.csv``);
- the ``metrics.json`` schema (:func:`metrics_document`, :func:`check_metrics`, :func:`write_run_report`): the
  same keys in every task, described in ``docs/architecture.md``.

Nothing here prints a report: the commands print (``summary.md`` holds the same text).
"""
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

#: Version of the ``metrics.json`` schema written by the driver (bumped when a key changes meaning).
METRICS_SCHEMA_VERSION = 2

T = TypeVar("T")

#: The protocols a run can follow (``metrics.json`` ``protocol.name``); ``fit_all`` trains on every row and
#: scores nothing held out (the activity task's ``--fit-all``).
PROTOCOL_NAMES = ("holdout", "seeds", "cv", "fit_all")


@dataclass(frozen=True)
class RunProtocol:
    """What a run trains: ``seeds`` (one model per seed on the same split), ``cv`` folds (``cv_repeats`` times
    with different shuffles), or neither (one model on the holdout split). ``description``: one sentence for the
    summary (the data's own split, early stopping...). ``name``: ``"cv"``, ``"seeds"`` or ``"holdout"`` (a task may
    name another of :data:`PROTOCOL_NAMES`)."""

    seeds: tuple[int, ...] | None = None
    cv: int | None = None
    cv_repeats: int = 1
    description: str = ""
    name_override: str | None = None

    @classmethod
    def of(cls, options: Any, description: str = "", name: str | None = None) -> "RunProtocol":
        """The protocol of a task's options (``seeds``, ``cv``, ``cv_repeats``)."""
        seeds = getattr(options, "seeds", None)
        return cls(tuple(seeds) if seeds else None, getattr(options, "cv", None), getattr(options, "cv_repeats", 1),
                   description, name)

    @property
    def name(self) -> str:
        if self.name_override:
            return self.name_override
        return "cv" if self.cv else "seeds" if self.seeds else "holdout"

    def to_dict(self, **extra: Any) -> dict[str, Any]:
        """``metrics.json``'s ``protocol``: ``name``, ``description``, ``seeds``, ``cv_folds``, ``cv_repeats`` and
        any task-specific ``extra`` keys."""
        return {"name": self.name, "description": self.description, "seeds": list(self.seeds) if self.seeds else None,
                "cv_folds": self.cv, "cv_repeats": self.cv_repeats if self.cv else None, **extra}


# ------------------------------------------------------------------------------------------ members
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
    ``run_dir`` its complete run directory (``None``: a member that is not saved), ``number`` of ``total`` its place
    in the run; a fold also carries the indices into the cross-validation pool it trains on (``train_index``) and
    predicts (``held_out_index``). ``alone``: the run's only model, trained in the run directory itself (no
    ensemble)."""

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


def cv_members(run_dir: Path | None, splits: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[Member]:
    """One member per ``(train_index, held_out_index)`` of ``splits`` in ``run_dir/fold<k>`` (k from 1); with
    ``run_dir`` ``None`` the members are not saved (no folders)."""
    return [Member("fold", k, None if run_dir is None else run_dir / member_dir_name("fold", k), k, len(splits),
                   np.asarray(train), np.asarray(held_out))
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
            saved_in = "" if member.run_dir is None else f" → {member.run_dir}"
            print(f"fold {member.index} of {member.total}: train {len(member.train_index)}, held out "  # type: ignore[arg-type]
                  f"{len(member.held_out_index)}{saved_in}", file=sys.stderr)  # type: ignore[arg-type]
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


def plan_members(run_dir: Path, protocol: RunProtocol, seed: int,
                 folds: Callable[[int, int], Iterable[tuple[np.ndarray, np.ndarray]]] | None = None) -> list[Member]:
    """The members of a run of ``protocol``: K × R folds of ``folds(k, seed + r)`` (:func:`repeated_folds`) for a
    cross-validation, else one per seed (:func:`seed_members`; the run's one model, seed ``seed``, in ``run_dir``
    itself for a holdout run)."""
    if protocol.cv:
        if folds is None:
            raise ValueError("a cross-validation needs the task's fold splitter")
        return cv_members(run_dir, repeated_folds(protocol.cv, protocol.cv_repeats, seed, folds))
    return seed_members(run_dir, protocol.seeds, seed)


@dataclass
class MembersRun(Generic[T]):
    """What :func:`run_members` returns: the ``members``, what fitting each returned (``results``, same order) and,
    for a cross-validation, the pooled held-out predictions (``out_of_fold``; ``None`` otherwise)."""

    members: list[Member]
    results: list[T]
    out_of_fold: OutOfFold | None = None


def run_members(run_dir: Path, members: Sequence[Member], fit: Callable[[Member], T], *, member_type: str | None = None,
                held_out: Callable[[Member, T], Mapping[str, np.ndarray]] | None = None,
                pool_size: int | None = None) -> MembersRun[T]:
    """Fit every member in order (:func:`train_members`): ``fit(member)`` builds, trains and saves one model in
    ``member.run_dir``. For a fold, on the main process, ``held_out(member, result)`` (called right after its fit)
    returns its held-out predictions by model name, pooled into :class:`OutOfFold` (``pool_size`` examples).
    ``member_type``: the model class the members are, written as the run directory's ensemble ``config.json``
    (:func:`save_members`) on the main process."""
    out_of_fold = None
    if members and members[0].kind == "fold" and held_out is not None:
        if pool_size is None:
            raise ValueError("pool_size is needed to pool the held-out predictions")
        # each repeat holds every pooled example out once: R = held-out rows / pool size, K = members / R
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


# ------------------------------------------------------------------------------------------ metrics.json
#: Keys every ``metrics.json`` has (schema :data:`METRICS_SCHEMA_VERSION`), beside the
#: task's own: see ``docs/architecture.md``.
METRICS_KEYS = ("schema_version", "task", "kind", "dataset", "protocol", "splits", "headline", "scores")
#: The split a headline is read from, in order of preference: a test split, the pooled out-of-fold
#: predictions, a held-out split, the mean over folds, a validation split.
HEADLINE_SPLITS = ("test", "oof", "held_out", "cv", "dev", "val")


def headline(task: Task, scores: Mapping[str, Mapping[str, Mapping[str, Any]]], split: str | None = None,
             model: str | None = None) -> dict[str, Any]:
    """``metrics.json``'s ``headline``: the task's headline metric of ``model`` (default: the first of ``scores``,
    the run's model) on ``split`` (default: the first of :data:`HEADLINE_SPLITS` it was scored on):
    ``{"metric", "model", "split", "value", "sd"}`` (``sd`` over seeds or folds where there are several, else
    ``None``; ``value`` ``None`` when nothing was scored)."""
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
    """A ``metrics.json`` in the shared schema: ``schema_version``, ``task`` (its registry name), ``kind``,
    ``dataset`` (a benchmark's name or the user's files), ``protocol`` (:meth:`RunProtocol.to_dict`), ``splits``
    (examples per split), ``class_names`` (classification) or ``target_names`` (regression), ``scores``
    (``{model or baseline: {split: {metric: value or {"mean", "sd", "n"}}}}``, the run's model first),
    ``headline`` (:func:`headline`), then the task's own keys (``extra``). ``task``: the task or its registry name."""
    if isinstance(task, str):
        module_name, _, attribute = plugins.task_target(task).partition(":")
        task = getattr(importlib.import_module(module_name), attribute)
    document: dict[str, Any] = {
        "schema_version": METRICS_SCHEMA_VERSION, "task": task.name, "kind": task.kind, "dataset": dataset,
        "protocol": dict(protocol), "splits": dict(splits),
    }
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
    """Raise ``ValueError`` naming what a ``metrics.json`` document lacks of the shared schema."""
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
    """Write ``run_dir/metrics.json`` (checked against the schema first, so a run never leaves a malformed one)
    and ``run_dir/summary.md``."""
    check_metrics(metrics)
    write_json(run_dir / "metrics.json", metrics)
    write_text(run_dir / "summary.md", summary if summary.endswith("\n") else summary + "\n")


# ------------------------------------------------------------------------------------------ the run
def run_task(task: Task, options: Any, config: Any = None, **inputs: Any) -> dict[str, Any]:
    """``task.run``: the whole training run of every task, through its hooks. :meth:`~Task.prepare` (the run
    directory and the data), :meth:`~Task.protocol` and :meth:`~Task.members`, then each member fitted in order
    (:func:`run_members`: ``fit_member``, a fold's :meth:`~Task.held_out` predictions pooled, the ensemble's
    ``config.json`` of ``task.member_type``); on the main process :meth:`~Task.report` (``metrics.json`` and
    ``summary.md``, written by :func:`write_run_report`) and, for a cross-validation,
    :meth:`~Task.write_out_of_fold`. Returns ``metrics.json``'s document (``{}`` off rank 0)."""
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
    if metrics is None:  # a run of several run directories (every MSA family), each with its own metrics.json
        return {}
    write_run_report(options.out, metrics, summary)
    return metrics
