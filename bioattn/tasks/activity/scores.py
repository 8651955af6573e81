"""Regression metrics of the activity task and its same-run baselines (k-mer ridge, mean predictor).

:func:`regression_metrics`: per target Pearson, Spearman (scipy), R² and MSE (scikit-learn); the headline keys
(``pearson``, ``spearman``, ``r2``, ``mse``) are the means over targets, and with several targets each one's own
as ``pearson:<target>`` etc.

Baselines, fitted on the training part of a split and scored like the model:

- ``k-mer ridge``: counts of every k-mer, k = 1..:data:`KMER_MAX` (scikit-learn ``CountVectorizer``), scaled to
  unit variance, ``RidgeCV`` with the penalty chosen per target by efficient leave-one-out CV over
  :data:`RIDGE_ALPHAS`.
- ``motif ridge``: the same ridge on the scores of known motif matrices (the activity model's motif branch
  features, :func:`~bioattn.tasks.activity.branches.motif_feature_matrix`), when the run computed them.
- ``mean``: the training mean of each target (Pearson undefined: reported as 0).

Beside them a run scores its deep model alone (:data:`DEEP_NAME`) when the saved model is a blend.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy.stats import pearsonr, spearmanr
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import RidgeCV
from sklearn.metrics import mean_squared_error, r2_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

KMER_MAX = 6
RIDGE_ALPHAS = tuple(np.logspace(0, 5, 11).tolist())
METRICS = ("pearson", "spearman", "r2", "mse")
RIDGE_NAME = f"k-mer (k=1..{KMER_MAX}) ridge regression (this run)"
MEAN_NAME = "mean predictor (this run)"
MOTIF_RIDGE_NAME = "known-motif ridge regression (this run)"
DEEP_NAME = "deep model alone, before the blend (this run)"


def _correlation(function, x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return 0.0
    return float(function(x, y)[0])


def regression_metrics(measured: np.ndarray, predicted: np.ndarray, target_names: Sequence[str]) -> dict[str, float]:
    """Pearson, Spearman, R² and MSE of ``predicted`` against ``measured`` (both ``(N, T)``): the mean over targets
    under the plain names, each target's own under ``<metric>:<target>`` when T > 1."""
    measured, predicted = np.asarray(measured, dtype=np.float64), np.asarray(predicted, dtype=np.float64)
    measured = measured.reshape(len(measured), -1)
    predicted = predicted.reshape(len(predicted), -1)
    per_target = []
    for t in range(measured.shape[1]):
        y, p = measured[:, t], predicted[:, t]
        per_target.append({
            "pearson": _correlation(pearsonr, p, y), "spearman": _correlation(spearmanr, p, y),
            "r2": float(r2_score(y, p)) if len(y) > 1 else 0.0, "mse": float(mean_squared_error(y, p)),
        })
    out = {name: float(np.mean([m[name] for m in per_target])) for name in METRICS}
    if len(per_target) > 1:
        for name, metrics in zip(target_names, per_target):
            out.update({f"{metric}:{name}": value for metric, value in metrics.items()})
    return out


def fit_kmer_ridge(sequences: Sequence[str], values: np.ndarray):
    """The k-mer ridge of the module docstring fitted on ``sequences`` / ``values (N, T)``; ``.predict(seqs)``
    gives ``(N, T)``."""
    model = make_pipeline(
        CountVectorizer(analyzer="char", ngram_range=(1, KMER_MAX), lowercase=False, dtype=np.float64),
        StandardScaler(with_mean=False),
        RidgeCV(alphas=RIDGE_ALPHAS, alpha_per_target=True),
    )
    return model.fit(list(sequences), np.asarray(values, dtype=np.float64))


def fit_feature_ridge(features: np.ndarray, values: np.ndarray):
    """The ridge of the module docstring on precomputed ``features (N, F)`` / ``values (N, T)``."""
    model = make_pipeline(StandardScaler(), RidgeCV(alphas=RIDGE_ALPHAS, alpha_per_target=True))
    return model.fit(np.asarray(features, dtype=np.float64), np.asarray(values, dtype=np.float64))


def baseline_predictions(train_sequences: Sequence[str], train_values: np.ndarray, evaluate: Sequence[str], *,
                         motif_features: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """``{baseline name: (N, T) predictions on evaluate}`` for the k-mer ridge, the motif ridge (when
    ``motif_features`` gives the (train, evaluate) scores) and the mean predictor."""
    ridge = fit_kmer_ridge(train_sequences, train_values)
    out = {RIDGE_NAME: np.asarray(ridge.predict(list(evaluate)), dtype=np.float64).reshape(len(evaluate), -1)}
    if motif_features is not None:
        motif_ridge = fit_feature_ridge(motif_features[0], train_values)
        out[MOTIF_RIDGE_NAME] = np.asarray(motif_ridge.predict(motif_features[1]), dtype=np.float64).reshape(
            len(evaluate), -1)
    mean = np.broadcast_to(np.asarray(train_values).mean(axis=0), (len(evaluate), np.shape(train_values)[1]))
    out[MEAN_NAME] = np.array(mean)
    return out
