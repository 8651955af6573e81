"""One entry point for every model: ``attribute(model, inputs, method)`` runs the attribution function of the task
whose ``model_types`` name the model's class (:data:`bioattn.tasks.registry.TASKS`, ``Task.attribution``)."""
from __future__ import annotations

import importlib
from typing import Any

import torch
from torch import Tensor

from bioattn.models.ensemble import ensemble_members
from bioattn.tasks.registry import all_tasks, task_of_model


def attribute(model: torch.nn.Module, inputs: Tensor, method: str, **options: Any) -> Tensor:
    """The ``method`` map (one of :data:`~bioattn.explain.attribution.METHODS`) of a model or an ensemble of them,
    by the ``attribution`` function of the model's task, for example:

    - a DNA classifier: token ids ``(B, L)`` (``PAD`` = padding) → ``(B, L)``;
    - a volume classifier: volumes ``(B, C, D, H, W)`` → ``(B, D, H, W)``;
    - a contact model: one alignment's tokens ``(N, L)`` → ``(L,)``.

    ``options`` go to that function (see each task's ``attribution``).
    """
    member = ensemble_members(model)[0]
    task = task_of_model(type(member))
    if task is None or task.attribution is None:
        known = sorted(name.split(":")[1] for t in all_tasks() if t.attribution for name in t.model_types.values())
        raise TypeError(f"no attribution for {type(member).__name__}; expected one of {', '.join(known)}")
    module_name, function = task.attribution.split(":")
    return getattr(importlib.import_module(module_name), function)(model, inputs, method, **options)
