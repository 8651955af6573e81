"""The activity task as a :class:`~bioattn.tasks.base.Task` (registry key ``"activity"``)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bioattn.tasks.base import FittedMember, Task, TaskData

if TYPE_CHECKING:  # the CLI reads every task.py at start-up: numpy and torch are imported by the hooks only
    import numpy as np
    from torch import nn


class ActivityTask(Task):
    """Sequence → measured activities (regression); headline Pearson (mean over targets)."""

    name = "activity"
    description = "quantitative activity regression (MPRA / expression) from DNA sequence"
    kind = "regression"
    headline_metric = "pearson"
    commands = {"train": "bioattn.tasks.activity.commands:TrainActivity",
                "predict": "bioattn.tasks.activity.commands:PredictActivity",
                "explain": "bioattn.tasks.activity.commands:ExplainActivity"}
    explain = "bioattn.tasks.activity.explain:explain_activity"
    attribution = "bioattn.tasks.activity.explain:attribute_tokens"
    member_type = "ActivityRegressor"
    reference: dict[str, dict[str, float]] = {}

    def load_data(self, options: Any) -> TaskData:
        from bioattn.tasks.activity.train import load_data
        data = load_data(options)
        return TaskData(train=data.pool, dev=data.dev, target_names=list(data.pool.target_names),
                        source=", ".join(data.files), extra={"activity_data": data})

    def prepare(self, options: Any, config: Any = None, **inputs: Any) -> tuple[Any, TaskData]:
        from bioattn.tasks.activity.run import prepare
        return prepare(options)

    def members(self, options: Any, data: TaskData, protocol: Any) -> list[Any]:
        from bioattn.tasks.activity.protocols import planned_members
        members, data.extra["plan"] = planned_members(options, data.extra["activity_data"], options.out)
        return members

    def fit_member(self, options: Any, data: TaskData, member: Any) -> FittedMember:
        """One member's blend and its parts (:func:`~bioattn.tasks.activity.protocols.fit`)."""
        from bioattn.tasks.activity.protocols import fit
        return fit(options, data.extra["activity_data"], member, data.extra.get("plan"))

    def held_out(self, options: Any, data: TaskData, member: Any, fitted: FittedMember) -> dict[str, Any]:
        return {}

    def report(self, options: Any, data: TaskData, protocol: Any, run: Any) -> tuple[dict[str, Any], str]:
        from bioattn.tasks.activity.run import report
        return report(options, data, run)

    def write_out_of_fold(self, options: Any, data: TaskData, run: Any, metrics: Any) -> None:
        from bioattn.tasks.activity.run import write_out_of_fold
        write_out_of_fold(options.out, data.extra["out_of_fold"])

    def predict_split(self, model: nn.Module, split: Any) -> np.ndarray:
        return model.predict(split.sequences, records=split.records)  # type: ignore[operator]

    def score(self, model: nn.Module, split: Any) -> dict[str, float]:
        from bioattn.tasks.activity.scores import regression_metrics
        return regression_metrics(split.values, self.predict_split(model, split), split.target_names)

    def fit_baselines(self, options: Any, train: Any, evaluate: Any) -> dict[str, dict[str, float]]:
        from bioattn.tasks.activity.scores import baseline_predictions, regression_metrics
        predictions = baseline_predictions(train.sequences, train.values, evaluate.sequences)
        return {name: regression_metrics(evaluate.values, values, evaluate.target_names)
                for name, values in predictions.items()}


TASK = ActivityTask()
