"""The CT task's contract (:class:`CTTask`, registered as ``ct``): 3D volume classification.

Imports only :mod:`bioattn.tasks.base` at module level; each hook imports the task's code when called.
"""
from __future__ import annotations

from typing import Any, Mapping

from bioattn.tasks.base import Task


class CTTask(Task):
    name = "ct"
    description = "3D volume classification (MedMNIST 3D or your own NIfTI/DICOM volumes + labels CSV)"
    kind = "classification"
    headline_metric = "auroc"
    model_types = {"HybridCT3D": "bioattn.models.hybrid_ct:HybridCT3D", "ResNetCT3D": "bioattn.models.ct_resnet:ResNetCT3D"}
    commands = {
        "train": "bioattn.commands.train_ct",
        "predict": "bioattn.commands.predict_ct",
        "explain": "bioattn.commands.explain_ct",
    }
    explain = "bioattn.explain.ct_report:explain_ct"
    attribution = "bioattn.explain.ct_attribution:volume_attribution"

    @property
    def reference(self) -> Mapping[str, Mapping[str, float]]:  # type: ignore[override]
        """Published test AUROC on MedMNIST 3D: ``{dataset: {model: value}}``."""
        from bioattn.tasks.ct.train import PUBLISHED

        return {dataset: {model: auroc for model, (auroc, _) in models.items()} for dataset, models in PUBLISHED.items()}

    def run(self, options: Any, config: Any = None) -> dict[str, Any]:
        """:func:`~bioattn.tasks.ct.train.train_ct` (``config`` replaces ``options.train_config`` when given)."""
        import dataclasses

        from bioattn.tasks.ct.train import train_ct

        if config is not None:
            options = dataclasses.replace(options, train_config=config)
        return train_ct(options)


TASK = CTTask()
