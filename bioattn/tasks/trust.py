"""How far a run's validation numbers can be trusted, for the summary of every classification run."""
from __future__ import annotations

import warnings
from typing import Any, Mapping, Sequence

import numpy as np
from scipy.stats import rankdata
from sklearn.metrics import confusion_matrix

from bioattn.metrics import classification_metrics
from bioattn.report import format_table

__all__ = ["SMALL_VALIDATION", "SMALL_CLASS", "BOOTSTRAP_SAMPLES", "HIGH_AUROC", "NEAR_CHANCE", "BASELINE_MARGIN",
           "predicted_classes", "bootstrap_interval", "trust_report", "baseline_warning", "format_trust"]

#: Validation sets smaller than this get a bootstrap interval.
SMALL_VALIDATION = 100
#: ... and so do those with fewer examples than this of some class.
SMALL_CLASS = 20
BOOTSTRAP_SAMPLES = 1000
#: An AUROC this high beside an accuracy at chance is a threshold problem.
HIGH_AUROC = 0.8
#: Probabilities all within this of chance are reported.
NEAR_CHANCE = 0.05
#: A same-run baseline ahead of the model by more than this (metric units) is named in the summary.
BASELINE_MARGIN = 0.03


def predicted_classes(probs: np.ndarray, threshold: float = 0.5) -> np.ndarray:
    """``(N,)`` or ``(N, C)`` → ``(N,)`` class indices, as :func:`bioattn.metrics.classification_metrics` predicts."""
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim == 2 and probs.shape[1] == 2:
        probs = probs[:, 1]
    return (probs >= threshold).astype(np.int64) if probs.ndim == 1 else probs.argmax(axis=1)


def bootstrap_interval(labels: np.ndarray, probs: np.ndarray, metric: str, *, threshold: float = 0.5,
                       samples: int = BOOTSTRAP_SAMPLES, level: float = 0.95, seed: int = 0) -> tuple[float, float] | None:
    """Bootstrap interval of ``metric`` resampled within each class; ``None`` when undefined."""
    labels = np.asarray(labels, dtype=np.int64)
    probs = np.asarray(probs, dtype=np.float64)
    if metric not in classification_metrics(labels, probs, threshold=threshold):
        return None
    rng = np.random.default_rng(seed)
    members = [np.flatnonzero(labels == c) for c in np.unique(labels)]
    index = np.concatenate([rng.choice(m, size=(samples, len(m))) for m in members], axis=1)  # (samples, N)
    if probs.ndim == 2 and probs.shape[1] == 2:
        probs = probs[:, 1]
    if probs.ndim == 1 and metric in _BINARY:
        values = _BINARY[metric](labels[index], probs[index], threshold)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            values = [classification_metrics(labels[i], probs[i], threshold=threshold)[metric] for i in index]
    alpha = (1 - level) / 2
    low, high = np.quantile(values, [alpha, 1 - alpha])
    return float(low), float(high)


def _binary_mcc(labels: np.ndarray, probs: np.ndarray, threshold: float) -> np.ndarray:
    """``(B, N)`` → ``(B,)`` MCC per row (0 where undefined)."""
    predicted = probs >= threshold
    truth = labels == 1
    tp, tn = (predicted & truth).sum(1), (~predicted & ~truth).sum(1)
    fp, fn = (predicted & ~truth).sum(1), (~predicted & truth).sum(1)
    denominator = np.sqrt(((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)).astype(np.float64))
    return np.divide((tp * tn - fp * fn).astype(np.float64), denominator, out=np.zeros(len(tp)), where=denominator > 0)


def _binary_accuracy(labels: np.ndarray, probs: np.ndarray, threshold: float) -> np.ndarray:
    return ((probs >= threshold) == (labels == 1)).mean(1)


def _binary_auroc(labels: np.ndarray, probs: np.ndarray, threshold: float) -> np.ndarray:
    """``(B, N)`` → ``(B,)`` AUROC per row (Mann-Whitney U)."""
    ranks = rankdata(probs, axis=1)
    positives = (labels == 1).sum(1)
    negatives = labels.shape[1] - positives
    return ((ranks * (labels == 1)).sum(1) - positives * (positives + 1) / 2) / (positives * negatives)


_BINARY = {"mcc": _binary_mcc, "accuracy": _binary_accuracy, "auroc": _binary_auroc}
_DISPLAY = {"mcc": "MCC", "auroc": "AUROC", "f1": "F1"}


def trust_report(labels: Sequence[int] | np.ndarray, probs: np.ndarray, *, threshold: float = 0.5,
                 class_names: Sequence[str] | None = None, headline: str = "mcc", split: str = "validation",
                 cv_hint: str = "--cv 5") -> dict[str, Any]:
    """A JSON-ready report on the kept model's ``probs`` for the ``split`` examples ``labels``."""
    labels = np.asarray(labels, dtype=np.int64)
    probs = np.asarray(probs, dtype=np.float64)
    num_classes = 2 if probs.ndim == 1 else probs.shape[1]
    names = list(class_names) if class_names is not None else [str(c) for c in range(num_classes)]
    predicted = predicted_classes(probs, threshold)
    matrix = confusion_matrix(labels, predicted, labels=list(range(num_classes)))
    metrics = classification_metrics(labels, probs, threshold=threshold)
    counts = np.bincount(labels, minlength=num_classes)
    present = [c for c in range(num_classes) if counts[c]]
    small = len(labels) < SMALL_VALIDATION or min(counts[c] for c in present) < SMALL_CLASS
    interval = bootstrap_interval(labels, probs, headline, threshold=threshold) if small else None
    found: list[str] = []
    predicted_set = sorted(set(predicted.tolist()))
    if len(present) > 1 and len(predicted_set) == 1:
        found.append(f"warning: the kept model predicts one class ({names[predicted_set[0]]}) for all {len(labels)} "
                     f"{split} examples, which hold {len(present)} classes: it has not learned to separate them "
                     "(too few optimizer steps or examples, or a learning rate that does not suit the data)")
    chance = counts.max() / max(1, counts.sum())
    auroc = metrics.get("auroc")
    if auroc is not None and auroc >= HIGH_AUROC and metrics["accuracy"] <= chance + 1e-9:
        found.append(f"warning: {split} accuracy {metrics['accuracy']:.3f} is at chance (the largest class is "
                     f"{chance:.3f} of the examples) while AUROC is {auroc:.3f}: the scores rank the classes but the "
                     f"threshold {threshold if num_classes == 2 else 'argmax'} does not separate them")
    full = np.stack([1 - probs, probs], axis=1) if probs.ndim == 1 else probs
    distance = float(np.abs(full - 1.0 / full.shape[1]).max()) if len(full) else 1.0
    if distance < NEAR_CHANCE:
        found.append(f"warning: every {split} probability of the kept model lies within {distance:.3f} of chance "
                     f"({1 / full.shape[1]:.3f} for {full.shape[1]} classes): it has barely learned, and its "
                     f"ranking rests on differences this small (a loss near ln {full.shape[1]} says the same)")
    if small:
        shown = f"[{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "undefined"
        if interval and interval[0] == interval[1]:
            shown += (f" (every resample of these {len(labels)} examples scores the same, so the bootstrap cannot show "
                      "the uncertainty; it does not make the value certain)")
        found.append(f"note: the {split} split is small ({len(labels)} examples, fewest per class {int(min(counts[c] for c in present))}): "
                     f"its {_DISPLAY.get(headline, headline)} {metrics.get(headline, float('nan')):.3f} has a bootstrap 95% interval of "
                     f"{shown}; for a steadier estimate train with {cv_hint} (cross-validation)")
    return {
        "split": split, "examples": int(len(labels)),
        "class_counts": {names[c]: int(counts[c]) for c in range(num_classes)},
        "threshold": float(threshold) if num_classes == 2 else None,
        "confusion": {"classes": names, "matrix": matrix.tolist()},
        "predicted_counts": {names[c]: int((predicted == c).sum()) for c in range(num_classes)},
        "headline": headline, "value": metrics.get(headline),
        "interval": list(interval) if interval else None, "small": bool(small), "warnings": found,
        "chance_distance": distance, "barely_learned": bool(distance < NEAR_CHANCE),
        "single_class": bool(len(present) > 1 and len(predicted_set) == 1),
    }


def baseline_warning(model_name: str, model_value: float | None, baselines: Mapping[str, float | None], metric: str,
                     *, scale: float = 1.0, margin: float = BASELINE_MARGIN) -> str | None:
    """A ``warning:`` line when the best of ``baselines`` beats ``model_value`` by over ``margin``."""
    scored = {name: value for name, value in baselines.items() if value is not None}
    if model_value is None or not scored:
        return None
    best = max(scored, key=lambda name: scored[name])  # type: ignore[arg-type, return-value]
    if scored[best] - model_value <= margin:  # type: ignore[operator]
        return None
    digits = 1 if scale >= 10 else 3
    return (f"warning: the baseline {best!r} beats {model_name} on {metric} ({scored[best] * scale:.{digits}f} against "
            f"{model_value * scale:.{digits}f}): on this data the simpler model is the better one")


def format_trust(report: Mapping[str, Any], title: str) -> str:
    """``report`` (:func:`trust_report`) as Markdown: the warnings, then the confusion matrix."""
    classes = report["confusion"]["classes"]
    rows = [[f"true {name}", *map(str, row)] for name, row in zip(classes, report["confusion"]["matrix"])]
    threshold = report["threshold"]
    rule = (f"predicted {classes[1]} when its probability is >= {threshold:g}" if threshold is not None
            else "predicted class = the most probable")
    table = format_table(["", *(f"predicted {name}" for name in classes)], rows,
                         title=f"{title} — confusion matrix on {report['split']} ({report['examples']} examples; {rule})")
    lines = list(report["warnings"])
    return "\n".join(lines) + ("\n\n" if lines else "") + table
