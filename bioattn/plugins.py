"""The one list of tasks, as a table of strings: registry key → the task's :class:`~bioattn.tasks.base.Task` object,
then each model class its runs save (``"module:attribute"`` each, imported only when used).

Adding a task is one line here, plus its model file ``bioattn/models/<name>.py`` and its folder
``bioattn/tasks/<name>/``. The table imports nothing and sits in the lowest layer, so the model loader
(:mod:`bioattn.models.registry`: a saved model's class from ``config.json``'s ``model_type``, which is the class
name) and the task layer (:mod:`bioattn.tasks.registry`: the command line and the explain dispatch) both read it
without importing upwards; reading it imports no torch.
"""
from __future__ import annotations

TASKS: dict[str, tuple[str, ...]] = {
    "promoter": ("bioattn.tasks.promoter.task:TASK", "bioattn.models.promoter:PromoterClassifier"),
    "ct": ("bioattn.tasks.ct.task:TASK", "bioattn.models.hybrid_ct:HybridCT3D", "bioattn.models.ct_resnet:ResNetCT3D"),
    "msa": ("bioattn.tasks.msa.task:TASK", "bioattn.models.msa_contact:MSAContactModel",
            "bioattn.models.msa_transformer:MSATransformer"),
    "activity": ("bioattn.tasks.activity.task:TASK", "bioattn.models.activity:ActivityRegressor"),
    "variants": ("bioattn.tasks.variants.task:TASK", "bioattn.models.variant_head:VariantEffectHead"),
}


def task_target(name: str) -> str:
    """``"module:attribute"`` of the registered task ``name``'s Task object (a :class:`KeyError` naming the known
    tasks otherwise)."""
    if name not in TASKS:
        raise KeyError(f"unknown task {name!r}; known: {', '.join(TASKS)}")
    return TASKS[name][0]


def model_types(name: str | None = None) -> dict[str, str]:
    """``{config.json model_type: "module:Class"}`` of the task ``name``, or of every task (``None``); a
    ``model_type`` is the class name."""
    names = list(TASKS) if name is None else [name]
    types: dict[str, str] = {}
    for task in names:
        task_target(task)
        for target in TASKS[task][1:]:
            model_type = target.rpartition(":")[2]
            if types.setdefault(model_type, target) != target:
                raise ValueError(f"model_type {model_type!r} is claimed by two tasks")
    return types
