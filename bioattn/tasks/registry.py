"""The registered tasks (:data:`bioattn.plugins.TASKS`), read without importing torch."""
from __future__ import annotations

import importlib

from bioattn import plugins
from bioattn.tasks.base import Task

#: Registry key → ``"module:attribute"`` of the task's Task object.
TASKS: dict[str, str] = {name: plugins.task_target(name) for name in plugins.TASKS}


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
    return plugins.model_types()


def task_of_model(model_class: type) -> Task | None:
    """The task whose ``model_types`` name ``model_class`` (or one of its bases), else ``None``."""
    for cls in model_class.__mro__:
        target = f"{cls.__module__}:{cls.__qualname__}"
        for task in all_tasks():
            if target in task.model_types.values():
                return task
    return None
