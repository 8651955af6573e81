"""The Task contract: what a kind of data (a *task*) tells bioattn so that the shared driver, the commands, the
model loader and the explain dispatch can serve it without naming it.

A task lives in one folder, ``bioattn/tasks/<name>/``, whose ``task.py`` defines one :class:`Task` instance
``TASK``; :data:`bioattn.plugins.TASKS` holds one line per task naming that object and the model classes its runs
save. Nothing else in bioattn names a task: the command line (``bioattn train|predict|explain <name>``),
:func:`bioattn.models.load_pretrained` (``config.json``'s ``model_type``) and
:func:`bioattn.tasks.explain_dispatch.attribute` are derived from the registry.

Hooks, in the order a training run calls them (the driver in :mod:`bioattn.tasks.driver` runs holdout, seeds,
cross-validation and ensembles the same way for every task):

1. ``load_data(options) -> TaskData``: the splits (``train``, ``dev`` or a cross-validation ``pool``), with
   ``class_names`` (classification) or ``target_names`` (regression).
2. ``fit_member(options, data, member) -> FittedMember``: build, fit and save one model in ``member.run_dir``.
3. ``score(model, split) -> dict[str, float]``: metrics on a split (``headline_metric`` is one of the keys).
4. ``predict_split(model, split) -> np.ndarray``: ``(N,)`` / ``(N, C)`` probabilities or ``(N, T)`` values, for
   out-of-fold files and ensembles.
5. ``fit_baselines(options, train, evaluate) -> dict[str, dict[str, float]]``: same-run baselines, scored like the
   model (``{baseline name: {metric: value}}``).
6. ``reference``: published numbers to print beside the run's (``{dataset: {model: value}}``).

The driver (:func:`bioattn.tasks.driver.run_task`) also calls, around them:

- ``prepare(options, config, **inputs) -> (options, TaskData)``: everything before the first member trains (check
  and create the run directory, read the data); default: :meth:`load_data`.
- ``protocol(options, data) -> RunProtocol`` and ``members(options, data, protocol) -> [Member]`` (default: the
  driver's seeds / folds of :meth:`folds`).
- ``held_out(options, data, member, fitted) -> {model name: predictions}``: a fold's held-out predictions, pooled
  into ``out_of_fold.csv`` by ``write_out_of_fold``.
- ``report(options, data, protocol, run) -> (metrics, summary)``: ``metrics.json`` (checked against the schema
  before it is written) and ``summary.md``.

``run(options, config=None, **inputs) -> dict`` is the driver's and no task overrides it: the whole
``bioattn train <name>`` protocol in one call (what ``metrics.json`` holds); the commands call it.

A ``task.py`` imports only this module at module level (the hooks import the task's code inside their bodies), so
reading a task's attributes (the CLI does it for every ``bioattn --help``) imports neither torch nor the task.

Every hook receives the task's own options dataclass (a subclass of
:class:`~bioattn.tasks.common.TaskOptions`), so a task adds options without touching the driver.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence

from bioattn import plugins

if TYPE_CHECKING:  # the registry reads Task attributes on every ``bioattn --help``: no torch / numpy here
    import numpy as np
    from torch import nn


#: What a task predicts; decides the driver's trust report (confusion matrix / intervals vs residuals).
KINDS = ("classification", "regression", "contacts")


@dataclass
class TaskData:
    """The data of one run. ``train`` / ``dev``: the task's own split objects (anything with ``len()``);
    ``pool``: the examples a cross-validation folds (``None``: ``train``), ``records`` where each came from (the
    rows of ``out_of_fold.csv``), ``seed`` the run's (its one model's, its folds' shuffles); ``class_names`` for a
    classifier, ``target_names`` for a regression (one name per output column); ``source``: where it came from,
    for summaries."""

    train: Any
    dev: Any | None = None
    pool: Any | None = None
    class_names: Sequence[str] | None = None
    records: Sequence[str] | None = None
    seed: int = 0
    target_names: Sequence[str] | None = None
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class FittedMember:
    """One fitted model of a run: the model (eval mode), the JSON-ready training summary (epochs, time,
    parameters) and where it was saved."""

    model: nn.Module
    summary: dict[str, Any]
    saved_to: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


class Task:
    """Base class of every task; subclasses set the class attributes and implement the hooks.

    Class attributes: ``name`` (CLI target and registry key), ``description`` (one line for help texts),
    ``kind`` (one of :data:`KINDS`), ``headline_metric`` (key of :meth:`score` the summary leads with; higher is
    better unless ``lower_is_better``), ``model_types`` (``config.json`` ``model_type`` → ``"module:Class"``,
    imported only when such a model is loaded; read from the task's line in :data:`bioattn.plugins.TASKS`),
    ``commands`` (verb → ``"module:Class"`` of the command's options dataclass, e.g.
    ``{"train": "bioattn.tasks.activity.commands:TrainActivity"}``; the CLI reads this table), ``explain`` (``"module:function"``
    of the explain pipeline, or ``None``), ``attribution`` (``"module:function"`` computing an attribution map for
    :func:`bioattn.tasks.explain_dispatch.attribute`, or ``None``), ``reference`` (published numbers).
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    kind: ClassVar[str] = "classification"
    headline_metric: ClassVar[str] = ""
    lower_is_better: ClassVar[bool] = False
    commands: ClassVar[Mapping[str, str]] = {}
    explain: ClassVar[str | None] = None
    attribution: ClassVar[str | None] = None
    reference: ClassVar[Mapping[str, Mapping[str, float]]] = {}
    #: Model class of the members (``config.json`` of a seeds / cv run directory); ``None``: no ensemble.
    member_type: ClassVar[str | None] = None
    #: ``out_of_fold.csv`` column prefix of each model name :meth:`held_out` returns (default: the name itself).
    out_of_fold_prefixes: ClassVar[Mapping[str, str]] = {}

    @property
    def model_types(self) -> Mapping[str, str]:
        """``config.json`` ``model_type`` → ``"module:Class"`` of the models this task saves (its line in
        :data:`bioattn.plugins.TASKS`)."""
        return plugins.model_types(self.name)

    # -- training hooks (see the module docstring) ------------------------------------------------------------
    def load_data(self, options: Any) -> TaskData:
        raise NotImplementedError

    def fit_member(self, options: Any, data: TaskData, member: Any) -> FittedMember:
        raise NotImplementedError

    def score(self, model: nn.Module, split: Any) -> dict[str, float]:
        raise NotImplementedError

    def predict_split(self, model: nn.Module, split: Any) -> np.ndarray:
        raise NotImplementedError

    def fit_baselines(self, options: Any, train: Any, evaluate: Any) -> dict[str, dict[str, float]]:
        return {}

    # -- the driver's run (see the module docstring) ------------------------------------------------------------
    def prepare(self, options: Any, config: Any = None, **inputs: Any) -> tuple[Any, TaskData]:
        return options, self.load_data(options)

    def protocol(self, options: Any, data: TaskData) -> Any:
        from bioattn.tasks.driver import RunProtocol

        return RunProtocol.of(options)

    def folds(self, data: TaskData) -> Any:
        """``folds(k, seed) -> [(train_index, held_out_index)]`` over ``data.pool``, for a cross-validation."""
        raise NotImplementedError(f"task {self.name!r} has no cross-validation")

    def members(self, options: Any, data: TaskData, protocol: Any) -> list[Any]:
        from bioattn.tasks.driver import plan_members

        return plan_members(options.out, protocol, data.seed, self.folds(data) if protocol.cv else None)

    def held_out(self, options: Any, data: TaskData, member: Any, fitted: FittedMember) -> dict[str, Any]:
        pool = data.pool if data.pool is not None else data.train
        return {"": self.predict_split(fitted.model, pool.subset(member.held_out_index))}

    def write_out_of_fold(self, options: Any, data: TaskData, run: Any, metrics: Mapping[str, Any]) -> None:
        from bioattn.tasks.driver import write_out_of_fold

        pool = data.pool if data.pool is not None else data.train
        write_out_of_fold(options.out, data.records or [], run.out_of_fold.fold_of, pool.labels,
                          list(data.class_names or ()),
                          {self.out_of_fold_prefixes.get(name, name): probs
                           for name, probs in run.out_of_fold.probabilities.items()})

    def report(self, options: Any, data: TaskData, protocol: Any, run: Any) -> tuple[dict[str, Any], str]:
        raise NotImplementedError(f"task {self.name!r} has no report()")

    def run(self, options: Any, config: Any = None, **inputs: Any) -> dict[str, Any]:
        """Train as ``bioattn train <name>`` does (holdout, seeds or cross-validation as ``options`` say) into
        ``options.out`` (:func:`bioattn.tasks.driver.run_task`); returns what ``metrics.json`` holds (``{}`` off
        rank 0)."""
        from bioattn.tasks.driver import run_task

        return run_task(self, options, config, **inputs)

    def __repr__(self) -> str:
        return f"<task {self.name}: {self.description}>"
