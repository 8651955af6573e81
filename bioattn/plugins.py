"""The one list of tasks: registry key → ``"module:attribute"`` of its Task, then its model classes."""
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
    """``"module:attribute"`` of the registered task ``name``'s Task object."""
    if name not in TASKS:
        raise KeyError(f"unknown task {name!r}; known: {', '.join(TASKS)}")
    return TASKS[name][0]


def model_types(name: str | None = None) -> dict[str, str]:
    """``{config.json model_type (the class name): "module:Class"}`` of the task ``name`` (``None``: every task)."""
    names = list(TASKS) if name is None else [name]
    types: dict[str, str] = {}
    for task in names:
        task_target(task)
        for target in TASKS[task][1:]:
            model_type = target.rpartition(":")[2]
            if types.setdefault(model_type, target) != target:
                raise ValueError(f"model_type {model_type!r} is claimed by two tasks")
    return types
