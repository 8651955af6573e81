"""The variants task: variant-effect scoring with any DNA model, and a variant-effect head fitted on a measured
release (the CAGI5 protocol)."""
from __future__ import annotations

from typing import Any

from bioattn.tasks.base import FittedMember, Task, TaskData


class VariantsTask(Task):
    """Scores variants with a DNA model (``bioattn predict variants``) and fits a variant-effect head on measured
    effects (``bioattn train variants``). Training runs through the shared driver (:meth:`Task.run`): a
    cross-validation whose folds are grouped by blocks of positions within each element, one fold member per split
    (its fitted paths are not saved: no ``fold<k>/`` folders, no ensemble), then the best path refitted on the whole
    release and saved as the run's head; the hooks are in :mod:`bioattn.tasks.variants.train`."""

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
        from bioattn.tasks.variants.train import prepare

        return prepare(options)

    def protocol(self, options: Any, data: TaskData) -> Any:
        from bioattn.tasks.variants.train import protocol

        return protocol(options)

    def members(self, options: Any, data: TaskData, protocol: Any) -> list[Any]:
        from bioattn.tasks.variants.train import members

        return members(options, data)

    def fit_member(self, options: Any, data: TaskData, member: Any) -> FittedMember:
        from bioattn.tasks.variants.train import fit

        return fit(options, data, member)

    def held_out(self, options: Any, data: TaskData, member: Any, fitted: FittedMember) -> dict[str, Any]:
        from bioattn.tasks.variants.train import held_out

        return held_out(fitted)

    def report(self, options: Any, data: TaskData, protocol: Any, run: Any) -> tuple[dict[str, Any], str]:
        from bioattn.tasks.variants.train import report

        return report(options, data, protocol, run)

    def write_out_of_fold(self, options: Any, data: TaskData, run: Any, metrics: Any) -> None:
        from bioattn.tasks.variants.train import write_out_of_fold

        write_out_of_fold(options, data)


TASK = VariantsTask()
