"""The MSA task's contract (:class:`MSATask`, registered as ``msa``): contact prediction from a protein alignment.

Imports only :mod:`bioattn.tasks.base` at module level; each hook imports the task's code when called.
"""
from __future__ import annotations

from typing import Any

from bioattn.tasks.base import Task


class MSATask(Task):
    name = "msa"
    description = "contact prediction from a protein alignment (one family, every family of a data root)"
    kind = "contacts"
    headline_metric = "P@L/5"
    commands = {
        "train": "bioattn.commands.train_msa",
        "predict": "bioattn.commands.predict_msa",
        "explain": "bioattn.commands.explain_msa",
        "pretrain": "bioattn.commands.pretrain_msa",
    }
    explain = "bioattn.tasks.msa.explain:explain_msa"
    attribution = "bioattn.tasks.msa.attribution:msa_attribution"

    def run(self, options: Any, config: Any = None, **inputs: Any) -> dict[str, Any]:
        """:func:`~bioattn.tasks.msa.train_run.train_msa` into ``options.out``; ``inputs``: its keyword arguments
        (``msa`` the alignment file, ``pdb``, ``all_families``, ...). Returns ``{}`` (the run writes its files)."""
        from bioattn.tasks.msa.features import DEFAULTS
        from bioattn.tasks.msa.train_run import train_msa

        msa = inputs.pop("msa", None)
        train_msa(msa, options.out, options, config or DEFAULTS, **inputs)
        return {}


TASK = MSATask()
