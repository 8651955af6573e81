"""The variants task: variant-effect scoring with any DNA model, and a variant-effect head fitted on a measured
release (the CAGI5 protocol)."""
from __future__ import annotations

from typing import Any

from bioattn.tasks.base import FittedMember, Task, TaskData


class VariantsTask(Task):
    """Scores variants with a DNA model (``bioattn predict variants``) and fits a variant-effect head on measured
    effects (``bioattn train variants``; the driver's hooks are in :mod:`bioattn.tasks.variants.train`)."""

    name = "variants"
    description = "variant-effect scoring (ref vs alt allele, saturation maps) and the CAGI5 variant-effect head"
    kind = "regression"
    headline_metric = "pearson"
    commands = {"predict": "bioattn.tasks.variants.commands:PredictVariants",
                "train": "bioattn.tasks.variants.commands:TrainVariants"}
    explain = None
    attribution = None
    reference = {
        "CAGI5 (zero-shot, lentiMPRA-trained, mean Pearson over LDLR, SORT1, F9)": {
            "CNN": 0.31, "ResidualBind": 0.49, "Sei embeddings + MPRA head": 0.58},
    }

    def prepare(self, options: Any, config: Any = None, **inputs: Any) -> tuple[Any, TaskData]:
        """:func:`~bioattn.tasks.variants.train.prepare`: the release and every variant's features."""
        return _train().prepare(options)

    def protocol(self, options: Any, data: TaskData) -> Any:
        return _train().protocol(options)

    def members(self, options: Any, data: TaskData, protocol: Any) -> list[Any]:
        return _train().members(options, data)

    def fit_member(self, options: Any, data: TaskData, member: Any) -> FittedMember:
        return _train().fit(options, data, member)

    def held_out(self, options: Any, data: TaskData, member: Any, fitted: FittedMember) -> dict[str, Any]:
        return _train().held_out(fitted)

    def report(self, options: Any, data: TaskData, protocol: Any, run: Any) -> tuple[dict[str, Any], str]:
        return _train().report(options, data, protocol, run)

    def write_out_of_fold(self, options: Any, data: TaskData, run: Any, metrics: Any) -> None:
        _train().write_out_of_fold(options, data)


def _train() -> Any:
    """:mod:`bioattn.tasks.variants.train`, imported when a run starts."""
    from bioattn.tasks.variants import train
    return train


TASK = VariantsTask()
