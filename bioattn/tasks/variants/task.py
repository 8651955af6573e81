"""The variants task: variant-effect scoring with any DNA model, and a variant-effect head fitted on a measured
release (the CAGI5 protocol)."""
from __future__ import annotations

from bioattn.tasks.base import Task


class VariantsTask(Task):
    """Scores variants with a DNA model (``bioattn predict variants``) and fits a variant-effect head on measured
    effects (``bioattn train variants``). Training is cross-validated inside :mod:`bioattn.tasks.variants.train`
    (folds grouped by position blocks), not through the shared ensemble driver."""

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


TASK = VariantsTask()
