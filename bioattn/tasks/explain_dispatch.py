"""One entry point for every model and task: :func:`attribute` and :func:`explain_pipeline`."""
from __future__ import annotations

import importlib
from typing import Any, Callable

import torch
from torch import Tensor

from bioattn.models.ensemble import ensemble_members
from bioattn.tasks.registry import all_tasks, get_task, task_of_model


def attribute(model: torch.nn.Module, inputs: Tensor, method: str, **options: Any) -> Tensor:
    """The ``method`` map of a model or ensemble by its task's ``attribution`` function."""
    member = ensemble_members(model)[0]
    task = task_of_model(type(member))
    if task is None or task.attribution is None:
        known = sorted(name.split(":")[1] for t in all_tasks() if t.attribution for name in t.model_types.values())
        raise TypeError(f"no attribution for {type(member).__name__}; expected one of {', '.join(known)}")
    module_name, function = task.attribution.split(":")
    return getattr(importlib.import_module(module_name), function)(model, inputs, method, **options)


def explain_pipeline(task: str) -> Callable[..., Any]:
    """The ``explain`` function of the registered task ``task``, e.g. ``explain_pipeline("ct")(model, volumes)``."""
    target = get_task(task).explain
    if target is None:
        raise ValueError(f"task {task!r} has no explain pipeline")
    module_name, function = target.split(":")
    return getattr(importlib.import_module(module_name), function)
