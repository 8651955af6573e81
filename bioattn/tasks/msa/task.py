"""The MSA task's contract (:class:`MSATask`, registered as ``msa``); each hook imports the task's code when called."""
from __future__ import annotations

from typing import Any

from bioattn.tasks.base import FittedMember, Task, TaskData


class MSATask(Task):
    name = "msa"
    description = "contact prediction from a protein alignment (one family, every family of a data root)"
    kind = "contacts"
    headline_metric = "P@L/5"
    commands = {
        "train": "bioattn.tasks.msa.commands:TrainMSA",
        "predict": "bioattn.tasks.msa.commands:PredictMSA",
        "explain": "bioattn.tasks.msa.explain_command:ExplainMSA",
        "pretrain": "bioattn.tasks.msa.commands:PretrainMSA",
    }
    explain = "bioattn.tasks.msa.explain:explain_msa"
    attribution = "bioattn.tasks.msa.attribution:msa_attribution"

    def prepare(self, options: Any, config: Any = None, **inputs: Any) -> tuple[Any, TaskData]:
        """:func:`~bioattn.tasks.msa.train_run.prepare` with ``inputs`` as its keyword arguments."""
        from bioattn.tasks.msa.train_run import prepare
        return prepare(options, config, **inputs)

    def members(self, options: Any, data: TaskData, protocol: Any) -> list[Any]:
        """One member, the whole run in ``options.out``."""
        from bioattn.tasks.driver import Member
        return [Member("seed", 0, options.out, 1, 1, alone=True)]

    def fit_member(self, options: Any, data: TaskData, member: Any) -> FittedMember:
        from bioattn.tasks.msa.train_run import fit
        return fit(options, data)

    def report(self, options: Any, data: TaskData, protocol: Any, run: Any) -> tuple[Any, str]:
        from bioattn.tasks.msa.train_run import report
        return report(options)


TASK = MSATask()
