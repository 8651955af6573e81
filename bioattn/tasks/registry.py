"""The one list of tasks: registry key → ``"module:attribute"`` of its :class:`~bioattn.tasks.base.Task`.

Adding a task is one line here (plus its model file and its folder ``bioattn/tasks/<name>/``); the command line,
the model loader and the explain dispatch read this table. Each entry is imported only when used.
"""
from __future__ import annotations

import importlib

from bioattn.tasks.base import Task

TASKS: dict[str, str] = {
    "variants": "bioattn.tasks.variants.task:TASK",
}


def get_task(name: str) -> Task:
    """The registered task ``name`` (a :class:`KeyError` naming the known ones otherwise)."""
    if name not in TASKS:
        raise KeyError(f"unknown task {name!r}; known: {', '.join(TASKS)}")
    module_name, attribute = TASKS[name].split(":")
    return getattr(importlib.import_module(module_name), attribute)
