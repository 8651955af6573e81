"""The CT task's contract (:class:`CTTask`); each hook imports the task's code when called."""
from __future__ import annotations

from typing import Any, Mapping

from bioattn.tasks.base import FittedMember, Task, TaskData


class CTTask(Task):
    name = "ct"
    description = "3D volume classification (MedMNIST 3D or your own NIfTI/DICOM volumes + labels CSV)"
    kind = "classification"
    headline_metric = "auroc"
    commands = {
        "train": "bioattn.tasks.ct.commands:TrainCT",
        "predict": "bioattn.tasks.ct.commands:PredictCT",
        "explain": "bioattn.tasks.ct.explain_command:ExplainCT",
    }
    explain = "bioattn.tasks.ct.explain:explain_ct"
    attribution = "bioattn.tasks.ct.attribution:volume_attribution"
    member_type = "HybridCT3D"

    @property
    def reference(self) -> Mapping[str, Mapping[str, float]]:  # type: ignore[override]
        """Published test AUROC on MedMNIST 3D: ``{dataset: {model: value}}``."""
        from bioattn.tasks.ct.train import PUBLISHED
        return {dataset: {model: auroc for model, (auroc, _) in models.items()} for dataset, models in PUBLISHED.items()}

    @property
    def out_of_fold_prefixes(self) -> Mapping[str, str]:  # type: ignore[override]
        from bioattn.tasks.ct.options import OOF_PREFIXES
        return OOF_PREFIXES

    def prepare(self, options: Any, config: Any = None, **inputs: Any) -> tuple[Any, TaskData]:
        from bioattn.tasks.ct.train import prepare
        return prepare(options, config)

    def load_data(self, options: Any) -> TaskData:
        """:func:`~bioattn.tasks.ct.train.prepare_ct` as :class:`~bioattn.tasks.base.TaskData` (writes nothing)."""
        from bioattn.tasks.ct.train import prepare_ct, task_data_of
        data = task_data_of(prepare_ct(options))
        data.extra["depth"] = None
        return data

    def protocol(self, options: Any, data: TaskData) -> Any:
        from bioattn.tasks.ct.train import _protocol_description
        from bioattn.tasks.driver import RunProtocol
        return RunProtocol.of(options, _protocol_description(options, data.extra["prepared"].data))

    def folds(self, data: TaskData) -> Any:
        import numpy as np
        from sklearn.model_selection import StratifiedKFold
        labels = data.pool.labels
        return lambda k, seed: StratifiedKFold(k, shuffle=True, random_state=seed).split(np.zeros(len(labels)), labels)

    def fit_member(self, options: Any, data: TaskData, member: Any) -> FittedMember:
        """:func:`~bioattn.tasks.ct.protocols.fit`: one member, saved in ``member.run_dir``."""
        from bioattn.tasks.ct.protocols import fit
        return fit(data, member)

    def held_out(self, options: Any, data: TaskData, member: Any, fitted: FittedMember) -> dict[str, Any]:
        from bioattn.tasks.ct.protocols import held_out
        return held_out(data, member, fitted)

    def report(self, options: Any, data: TaskData, protocol: Any, run: Any) -> tuple[dict[str, Any], str]:
        from bioattn.tasks.ct.train import report
        return report(data, run)

    def score(self, model: Any, split: Any) -> dict[str, float]:
        from bioattn.metrics import classification_metrics
        return classification_metrics(split.labels, self.predict_split(model, split))

    def predict_split(self, model: Any, split: Any) -> Any:
        """``(N, C)`` class probabilities, averaged over the 8 flips when the run's protocol does."""
        from bioattn.models.ct_classifier import predict_probabilities
        return predict_probabilities(model, split.volumes, batch_size=8, flip_tta=split.flip_tta)

    def fit_baselines(self, options: Any, train: Any, evaluate: Any) -> dict[str, dict[str, float]]:
        """The mean-depth baseline of binary masks (the ResNet trains beside each member)."""
        from bioattn.metrics import classification_metrics
        from bioattn.tasks.ct.options import DEPTH_BASELINE_NAME
        from bioattn.tasks.ct.protocols import depth_baseline_probabilities, mean_mask_depth
        if not train.binary:
            return {}
        train_depth, depth = mean_mask_depth(train.volumes), mean_mask_depth(evaluate.volumes)
        probs = depth_baseline_probabilities(train_depth, train.labels, depth)
        return {DEPTH_BASELINE_NAME: classification_metrics(evaluate.labels, probs)}


TASK = CTTask()
