"""One entry point for every model and task: ``attribute(model, inputs, method)`` runs the attribution function of
the task whose ``model_types`` name the model's class (``Task.attribution``), and ``explain_pipeline(task)`` returns
a task's whole explanation (``Task.explain``), both found through :data:`bioattn.tasks.registry.TASKS`.

They sit in the task layer, above the method-generic code of :mod:`bioattn.explain` that each task's pipeline
builds on."""
from __future__ import annotations

import importlib
from typing import Any, Callable

import torch
from torch import Tensor

from bioattn.models.ensemble import ensemble_members
from bioattn.tasks.registry import all_tasks, get_task, task_of_model


def attribute(model: torch.nn.Module, inputs: Tensor, method: str, **options: Any) -> Tensor:
    """The ``method`` map (one of the methods of the model's task, e.g.
    :data:`~bioattn.explain.attribution.METHODS`) of a model or an ensemble of them, by the ``attribution``
    function of the model's task, for example:

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


def explain_pipeline(task: str) -> Callable[..., Any]:
    """The whole explanation of the registered task ``task`` (its ``explain`` function, imported now), e.g.
    ``explain_pipeline("ct")(model, volumes)``."""
    target = get_task(task).explain
    if target is None:
        raise ValueError(f"task {task!r} has no explain pipeline")
    module_name, function = target.split(":")
    return getattr(importlib.import_module(module_name), function)
