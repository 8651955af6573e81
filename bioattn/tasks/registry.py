"""The one list of tasks: registry key → ``"module:attribute"`` of its :class:`~bioattn.tasks.base.Task`.

Adding a task is one line here (plus its model file and its folder ``bioattn/tasks/<name>/``); the command line,
the model loader and the explain dispatch read this table. Each entry is imported only when used, and a task's
``task.py`` imports only :mod:`bioattn.tasks.base` at module level, so reading the tasks imports no torch.
"""
from __future__ import annotations

import importlib

from bioattn.tasks.base import Task

TASKS: dict[str, str] = {
    "promoter": "bioattn.tasks.promoter.task:TASK",
    "ct": "bioattn.tasks.ct.task:TASK",
    "msa": "bioattn.tasks.msa.task:TASK",
    "activity": "bioattn.tasks.activity.task:TASK",
    "variants": "bioattn.tasks.variants.task:TASK",
}


def get_task(name: str) -> Task:
    """The registered task ``name`` (a :class:`KeyError` naming the known ones otherwise)."""
    if name not in TASKS:
        raise KeyError(f"unknown task {name!r}; known: {', '.join(TASKS)}")
    module_name, attribute = TASKS[name].split(":")
    return getattr(importlib.import_module(module_name), attribute)


def all_tasks() -> list[Task]:
    """Every registered task, in registry order."""
    return [get_task(name) for name in TASKS]


def task_commands() -> dict[str, dict[str, str]]:
    """``{verb: {task name: command module}}`` from the tasks' ``commands`` (verbs in first-seen order)."""
    table: dict[str, dict[str, str]] = {}
    for task in all_tasks():
        for verb, module in task.commands.items():
            table.setdefault(verb, {})[task.name] = module
    return table


def task_model_types() -> dict[str, str]:
    """``{config.json model_type: "module:Class"}``, the union of the tasks' ``model_types``."""
    types: dict[str, str] = {}
    for task in all_tasks():
        for model_type, target in task.model_types.items():
            if types.setdefault(model_type, target) != target:
                raise ValueError(f"model_type {model_type!r} is claimed by two tasks")
    return types


def task_of_model(model_class: type) -> Task | None:
    """The task whose ``model_types`` name ``model_class`` (or one of its bases), else ``None``."""
    for cls in model_class.__mro__:
        target = f"{cls.__module__}:{cls.__qualname__}"
        for task in all_tasks():
            if target in task.model_types.values():
                return task
    return None
