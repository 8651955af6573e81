"""The CT task's contract (:class:`CTTask`, registered as ``ct``): 3D volume classification.

Imports only :mod:`bioattn.tasks.base` at module level; each hook imports the task's code when called.
"""
from __future__ import annotations

from typing import Any, Mapping

from bioattn.tasks.base import FittedMember, Task, TaskData


class CTTask(Task):
    name = "ct"
    description = "3D volume classification (MedMNIST 3D or your own NIfTI/DICOM volumes + labels CSV)"
    kind = "classification"
    headline_metric = "auroc"
    commands = {
        "train": "bioattn.commands.train_ct",
        "predict": "bioattn.commands.predict_ct",
        "explain": "bioattn.commands.explain_ct",
    }
    explain = "bioattn.tasks.ct.explain:explain_ct"
    attribution = "bioattn.tasks.ct.attribution:volume_attribution"

    @property
    def reference(self) -> Mapping[str, Mapping[str, float]]:  # type: ignore[override]
        """Published test AUROC on MedMNIST 3D: ``{dataset: {model: value}}``."""
        from bioattn.tasks.ct.train import PUBLISHED

        return {dataset: {model: auroc for model, (auroc, _) in models.items()} for dataset, models in PUBLISHED.items()}

    def load_data(self, options: Any) -> TaskData:
        """:func:`~bioattn.tasks.ct.train.prepare_ct`: ``train`` / ``dev`` are the training and validation volumes
        (:class:`~bioattn.tasks.ct.data.LabelledVolumes`), ``pool`` both (what a cross-validation folds)."""
        from bioattn.tasks.ct.data import LabelledVolumes
        from bioattn.tasks.ct.train import prepare_ct

        ready = prepare_ct(options)
        data, flips, binary = ready.data, ready.protocol.flip_tta, bool(ready.saved.profile.get("binary"))
        train, dev = (LabelledVolumes(data.splits[s], data.labels[s], flips, binary) for s in ("train", "val"))
        return TaskData(train=train, dev=dev, pool=train.join(dev), class_names=ready.model_config["class_names"],
                        source=str(data.path), extra={"prepared": ready})

    def fit_member(self, options: Any, data: TaskData, member: Any) -> FittedMember:
        """The attention model (and the baseline, in ``baseline_resnet/``) of one member, trained on ``data.train``
        with ``data.dev`` for model selection, seed ``member.index``, saved in ``member.run_dir``."""
        import dataclasses

        from bioattn.tasks.ct.options import HYBRID_NAME
        from bioattn.tasks.ct.protocols import _train_pair

        ready = data.extra["prepared"]
        trained = _train_pair(ready.options, ready.data, dataclasses.replace(ready.config, seed=member.index),
                              ready.protocol, member.run_dir, ready.run_info, ready.saved)
        return FittedMember(model=trained.hybrid.eval(), summary=trained.results[HYBRID_NAME], saved_to=member.run_dir)

    def score(self, model: Any, split: Any) -> dict[str, float]:
        from bioattn.metrics import classification_metrics

        return classification_metrics(split.labels, self.predict_split(model, split))

    def predict_split(self, model: Any, split: Any) -> Any:
        """``(N, C)`` class probabilities, averaged over the 8 flips when the run's protocol does."""
        from bioattn.models.ct_classifier import predict_probabilities

        return predict_probabilities(model, split.volumes, batch_size=8, flip_tta=split.flip_tta)

    def fit_baselines(self, options: Any, train: Any, evaluate: Any) -> dict[str, dict[str, float]]:
        """The one-number baseline of binary masks (a logistic regression on the mean depth inside the mask);
        the 3D ResNet baseline is trained beside each member by :meth:`fit_member`."""
        from bioattn.metrics import classification_metrics
        from bioattn.tasks.ct.options import DEPTH_BASELINE_NAME
        from bioattn.tasks.ct.protocols import depth_baseline_probabilities, mean_mask_depth

        if not train.binary:
            return {}
        train_depth, depth = mean_mask_depth(train.volumes), mean_mask_depth(evaluate.volumes)
        probs = depth_baseline_probabilities(train_depth, train.labels, depth)
        return {DEPTH_BASELINE_NAME: classification_metrics(evaluate.labels, probs)}

    def run(self, options: Any, config: Any = None) -> dict[str, Any]:
        """:func:`~bioattn.tasks.ct.train.train_ct` (``config`` replaces ``options.train_config`` when given)."""
        import dataclasses

        from bioattn.tasks.ct.train import train_ct

        if config is not None:
            options = dataclasses.replace(options, train_config=config)
        return train_ct(options)


TASK = CTTask()
