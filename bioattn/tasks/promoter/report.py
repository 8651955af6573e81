"""The promoter task's reports: a run's comparison tables, the published GUE numbers and the saved model's metrics."""
from __future__ import annotations

from typing import Any, Mapping

from bioattn.metrics import with_prefix
from bioattn.report import format_mean_sd, format_table, format_value
from bioattn.tasks.trust import format_trust
from bioattn.tasks.promoter.train import ECOLI_TASK, GUE_TASKS, PUBLISHED_GUE, Scores

_COLUMNS = (("MCC×100", "mcc", 100.0, 2), ("accuracy", "accuracy", 1.0, 4), ("AUROC", "auroc", 1.0, 4), ("F1", "f1", 1.0, 4))


def _cell(value: Any, scale: float, digits: int) -> str:
    if isinstance(value, Mapping):  # {"mean", "sd", "n"} over folds
        return format_mean_sd(value, digits, scale=scale)
    return format_value(value, digits, scale=scale)


def comparison_table(title: str, scores: Scores) -> str:
    """One Markdown table per evaluated split: each method's MCC×100, accuracy, AUROC and F1."""
    tables = []
    for split in next(iter(scores.values())):
        rows = [[method, *(_cell(per_split[split].get(key), scale, digits) for _, key, scale, digits in _COLUMNS)]
                for method, per_split in scores.items() if split in per_split]
        suffix = {"cv": " (mean ± sd over folds)", "oof": " (out-of-fold predictions pooled)"}.get(split, "")
        tables.append(format_table(["method", *(c[0] for c in _COLUMNS)], rows, title=f"{title} — {split} split{suffix}"))
    return "\n\n".join(tables)


def published_table(task: str | None) -> str:
    """The published GUE MCC×100 for ``task``, or a note that there are none comparable."""
    if task not in GUE_TASKS:
        return "published numbers for this data use other protocols (E. coli: see data_cards/ecoli_sigma70.md)" \
            if task == ECOLI_TASK else ""
    rows = [[name, format_value(values[task], 2)] for name, values in PUBLISHED_GUE.items()]
    return format_table(["model", "MCC×100"], rows, title="published (official GUE test split, not this run)")


def format_report(metrics: Mapping[str, Any]) -> str:
    """The comparison tables of a ``metrics.json`` dict, then the published numbers where they exist."""
    parts = [comparison_table(metrics["dataset"], metrics["scores"]), published_table(metrics["dataset"])]
    if metrics.get("trust"):
        parts.insert(1, format_trust(metrics["trust"], next(iter(metrics["scores"]))))
    return "\n\n".join(part for part in parts if part)


def model_metrics(scores: Scores) -> dict[str, float]:
    """The first method's metrics under the project's keys (``dev_mcc``, ``oof_mcc``, ``cv_mcc``...)."""
    out: dict[str, float] = {}
    for split, metrics in next(iter(scores.values())).items():
        out.update(with_prefix(split, {k: v["mean"] if isinstance(v, Mapping) else v for k, v in metrics.items()}))
    return out
