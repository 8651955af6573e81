"""Every metric bioattn reports: classification, contact precision, mean ± sd."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
from sklearn.metrics import accuracy_score, f1_score, log_loss, matthews_corrcoef, roc_auc_score

__all__ = ["CLASSIFICATION_METRICS", "CONTACT_CUTOFF", "LONG_RANGE", "TOP_FRACTIONS", "PRECISION_NAMES",
           "classification_metrics", "with_prefix", "mean_std", "residues_with_coordinates", "precision_at",
           "NEGATIVE_LABELS", "order_binary_classes", "decision_threshold", "margin_threshold"]

CLASSIFICATION_METRICS = ("mcc", "accuracy", "f1", "auroc", "loss")
CONTACT_CUTOFF = 8.0
LONG_RANGE = 24
TOP_FRACTIONS = (5, 2, 1)
#: Column names of contact precision at top-L/k for each k of :data:`TOP_FRACTIONS`.
PRECISION_NAMES = tuple("P@L" if k == 1 else f"P@L/{k}" for k in TOP_FRACTIONS)


def _as_class_probabilities(probs: np.ndarray) -> np.ndarray:
    """``(N,)`` or ``(N, C)`` → ``(N, C)``, C ≥ 2."""
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim == 1:
        return np.stack([1.0 - probs, probs], axis=1)
    if probs.ndim != 2 or probs.shape[1] < 2:
        raise ValueError(f"probs must be (N,) or (N, C) with C >= 2, got shape {probs.shape}")
    return probs


def classification_metrics(labels: Sequence[int] | np.ndarray, probs: np.ndarray, *, threshold: float = 0.5) -> dict[str, float]:
    """``labels (N,)``, ``probs (N,) or (N, C)`` → MCC, accuracy, F1, AUROC and ``loss``."""
    labels = np.asarray(labels, dtype=np.int64)
    full = _as_class_probabilities(probs)
    if len(labels) != len(full):
        raise ValueError(f"{len(labels)} labels but {len(full)} predictions")
    num_classes = full.shape[1]
    binary = num_classes == 2
    predicted = (full[:, 1] >= threshold).astype(np.int64) if binary else full.argmax(axis=1)
    classes = list(range(num_classes))
    clipped = np.clip(full, 1e-7, 1 - 1e-7)
    metrics = {
        "mcc": float(matthews_corrcoef(labels, predicted)),
        "accuracy": float(accuracy_score(labels, predicted)),
        "f1": float(f1_score(labels, predicted, average="binary" if binary else "macro", labels=None if binary else classes,
                             zero_division=0)),
        "loss": float(log_loss(labels, clipped / clipped.sum(axis=1, keepdims=True), labels=classes)),
    }
    if len(np.unique(labels)) > 1:
        if binary:
            metrics["auroc"] = float(roc_auc_score(labels, full[:, 1]))
        elif len(np.unique(labels)) == num_classes:
            metrics["auroc"] = float(roc_auc_score(labels, full, multi_class="ovr", labels=classes))
    return metrics


def with_prefix(prefix: str, metrics: Mapping[str, float]) -> dict[str, float]:
    """``{"mcc": .7}`` → ``{"dev_mcc": .7}`` for ``prefix="dev"``."""
    return {f"{prefix}_{name}": value for name, value in metrics.items()}


def mean_std(runs: Sequence[Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Per metric over several runs: ``{name: {"mean", "sd", "n"}}`` (sample sd; 0 for one run)."""
    names = [name for name in runs[0]] if runs else []
    for run in runs[1:]:
        names += [name for name in run if name not in names]
    summary = {}
    for name in names:
        values = np.array([run[name] for run in runs if run.get(name) is not None], dtype=np.float64)
        if len(values):
            sd = float(values.std(ddof=1)) if len(values) > 1 else 0.0
            summary[name] = {"mean": float(values.mean()), "sd": sd, "n": int(len(values))}
    return summary


def residues_with_coordinates(distances: np.ndarray) -> np.ndarray:
    """Bool ``(L,)``: residue has a finite distance to some other residue."""
    finite = np.isfinite(distances)
    np.fill_diagonal(finite, False)
    return finite.any(axis=1)


def precision_at(scores: np.ndarray, distances: np.ndarray, *, min_separation: int = LONG_RANGE,
                 fractions: tuple[int, ...] = TOP_FRACTIONS, cutoff: float = CONTACT_CUTOFF) -> dict[str, float]:
    """``(L, L)``, ``(L, L)`` → precision of the top-L/k pairs with separation ≥ ``min_separation``."""
    if scores.shape != distances.shape or scores.ndim != 2:
        raise ValueError(f"scores {scores.shape} and distances {distances.shape} must be the same (L, L) shape")
    length = int(residues_with_coordinates(distances).sum())
    i, j = np.triu_indices(scores.shape[0], k=min_separation)
    known = np.isfinite(distances[i, j])
    i, j = i[known], j[known]
    pair_scores = np.nan_to_num(scores[i, j].astype(np.float64), nan=-np.inf)
    order = np.argsort(-pair_scores, kind="stable")
    is_contact = distances[i, j][order] < cutoff
    result = {}
    for k in fractions:
        top = max(length // k, 1)
        name = "P@L" if k == 1 else f"P@L/{k}"
        result[name] = float(is_contact[:top].mean()) if len(is_contact) else float("nan")
    return result


#: Labels that read as the negative class of a binary task (case-insensitive).
NEGATIVE_LABELS = ("normal", "negative", "control", "healthy", "benign", "background", "absent", "no", "false", "0")


def order_binary_classes(names: Sequence[str], positive: str | None = None) -> tuple[list[str], str | None]:
    """``(names, reason)``: the classes in the order the model uses (positive second) and why."""
    from bioattn.errors import UserInputError
    names = [str(name) for name in names]
    if len(names) != 2:
        if positive is not None:
            raise UserInputError(f"a positive class ({positive}) applies to two classes; the labels hold {len(names)} "
                                 f"({', '.join(names)})")
        return names, None
    if positive is not None:
        if str(positive) not in names:
            raise UserInputError(f"positive class {positive!r} is not one of the labels ({', '.join(names)})")
        negative = names[1 - names.index(str(positive))]
        return [negative, str(positive)], f"positive class: {positive} (--positive-class)"
    negatives = [name for name in names if name.strip().lower() in NEGATIVE_LABELS]
    if len(negatives) == 1:
        other = names[1 - names.index(negatives[0])]
        return [negatives[0], other], (f"positive class: {other} ({negatives[0]} reads as the negative label; "
                                       "--positive-class NAME chooses another)")
    return names, f"positive class: {names[1]} (the second label in sorted order; --positive-class NAME chooses another)"


def _balanced_accuracy_of_cuts(labels: np.ndarray, positive: np.ndarray, cuts: np.ndarray) -> tuple[np.ndarray, float]:
    """``(K,)`` balanced accuracy of each cut, and what one example of the smaller class is worth on that scale."""
    predicted = positive[None, :] >= cuts[:, None]
    balanced = (predicted[:, labels == 1].mean(1) + (~predicted[:, labels == 0]).mean(1)) / 2
    return balanced, 0.5 / min(int((labels == 1).sum()), int((labels == 0).sum()))


def decision_threshold(labels: Sequence[int] | np.ndarray, positive: np.ndarray, default: float = 0.5) -> float:
    """The cut on the positive probability best by balanced accuracy (``default`` unless clearly not)."""
    labels = np.asarray(labels, dtype=np.int64)
    positive = np.asarray(positive, dtype=np.float64)
    if len(set(labels.tolist())) < 2:
        return default
    values = np.unique(positive)
    candidates = np.concatenate([[default], (values[1:] + values[:-1]) / 2, [values[0] - 1e-6, values[-1] + 1e-6]])
    scores, one_example = _balanced_accuracy_of_cuts(labels, positive, candidates)
    best = scores.max()
    if best - scores[0] <= one_example + 1e-12:
        return default
    good = candidates[scores >= best - 1e-12]
    return float(good[np.argmin(np.abs(good - default))])


def margin_threshold(labels: Sequence[int] | np.ndarray, positive: np.ndarray, default: float = 0.5) -> float:
    """The cut in the widest gap among those within one example of the best balanced accuracy."""
    labels = np.asarray(labels, dtype=np.int64)
    positive = np.asarray(positive, dtype=np.float64)
    if len(set(labels.tolist())) < 2:
        return default
    values = np.unique(positive)
    if len(values) < 2:
        return default
    cuts = (values[1:] + values[:-1]) / 2
    balanced, one_example = _balanced_accuracy_of_cuts(labels, positive, cuts)
    best = balanced.max()
    if best <= 0.5 + 1e-12:
        return default
    good = np.flatnonzero((balanced >= best - one_example - 1e-12) & (balanced > 0.5 + 1e-12))
    widest = good[np.argmax(values[good + 1] - values[good])]
    return float(cuts[widest])
