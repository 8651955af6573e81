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
    reference: dict[str, dict[str, float]] = {}

    def load_data(self, options: Any) -> TaskData:
        from bioattn.tasks.activity.train import load_data

        data = load_data(options)
        return TaskData(train=data.pool, dev=data.dev, target_names=list(data.pool.target_names),
                        source=", ".join(data.files), extra={"activity_data": data})

    def fit_member(self, options: Any, data: TaskData, member: Any) -> FittedMember:
        from bioattn.tasks.activity.train import fit_model

        activity = data.extra["activity_data"]
        train = activity.pool.subset(member.train_index) if member.train_index is not None else activity.pool
        seed = member.index if member.kind == "seed" else options.seed
        model, summary, _ = fit_model(options, activity, train, member.run_dir, seed)
        return FittedMember(model=model, summary=summary, saved_to=member.run_dir)

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
