"""The Task contract: what a task tells the driver, the commands, the model loader and the explain dispatch."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence

from bioattn import plugins

if TYPE_CHECKING:
    import numpy as np
    from torch import nn


#: What a task predicts.
KINDS = ("classification", "regression", "contacts")


@dataclass
class TaskData:
    """The data of one run; ``pool``: what a cross-validation folds (``None``: ``train``)."""

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
    """One fitted model (eval mode), its JSON-ready training summary and where it was saved."""

    model: nn.Module
    summary: dict[str, Any]
    saved_to: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


class Task:
    """Base class of every task; subclasses set the class attributes and implement the hooks."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    kind: ClassVar[str] = "classification"
    headline_metric: ClassVar[str] = ""
    lower_is_better: ClassVar[bool] = False
    commands: ClassVar[Mapping[str, str]] = {}
    explain: ClassVar[str | None] = None
    attribution: ClassVar[str | None] = None
    reference: ClassVar[Mapping[str, Mapping[str, float]]] = {}
    #: Model class of an ensemble's members; ``None``: no ensemble.
    member_type: ClassVar[str | None] = None
    #: ``out_of_fold.csv`` column prefix per model name of :meth:`held_out` (default: the name).
    out_of_fold_prefixes: ClassVar[Mapping[str, str]] = {}

    @property
    def model_types(self) -> Mapping[str, str]:
        """``config.json`` ``model_type`` → ``"module:Class"`` of the models this task saves."""
        return plugins.model_types(self.name)

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

    def prepare(self, options: Any, config: Any = None, **inputs: Any) -> tuple[Any, TaskData]:
        return options, self.load_data(options)

    def protocol(self, options: Any, data: TaskData) -> Any:
        from bioattn.tasks.driver import RunProtocol
        return RunProtocol.of(options)

    def folds(self, data: TaskData) -> Any:
        """``folds(k, seed) -> [(train_index, held_out_index)]`` over ``data.pool``."""
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
                          list(data.class_names or ()), {self.out_of_fold_prefixes.get(name, name): probs
                                                         for name, probs in run.out_of_fold.probabilities.items()})

    def report(self, options: Any, data: TaskData, protocol: Any, run: Any) -> tuple[dict[str, Any], str]:
        raise NotImplementedError(f"task {self.name!r} has no report()")

    def run(self, options: Any, config: Any = None, **inputs: Any) -> dict[str, Any]:
        """Train as ``bioattn train <name>`` does into ``options.out``; what ``metrics.json`` holds."""
        from bioattn.tasks.driver import run_task
        return run_task(self, options, config, **inputs)

    def __repr__(self) -> str:
        return f"<task {self.name}: {self.description}>"
