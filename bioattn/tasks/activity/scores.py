"""Regression metrics of the activity task and its same-run baselines (k-mer ridge, motif ridge, mean predictor)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.stats import pearsonr, spearmanr
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import RidgeCV
from sklearn.metrics import mean_squared_error, r2_score

KMER_MAX = 6
RIDGE_ALPHAS = tuple(np.logspace(-3, 7, 41).tolist())
METRICS = ("pearson", "spearman", "r2", "mse")
RIDGE_NAME = f"k-mer (k=1..{KMER_MAX}) ridge regression (this run)"
MEAN_NAME = "mean predictor (this run)"
MOTIF_RIDGE_NAME = "known-motif ridge regression (this run)"
DEEP_NAME = "deep model alone, before the blend (this run)"
BLEND_NAME = "blend of the deep model and the ridges (this run)"


def _correlation(function, x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return 0.0
    return float(function(x, y)[0])


def regression_metrics(measured: np.ndarray, predicted: np.ndarray, target_names: Sequence[str]) -> dict[str, float]:
    """``(N, T)`` → Pearson, Spearman, R², MSE: means over targets, ``<metric>:<target>`` when T > 1; NaN skipped."""
    measured = np.asarray(measured, dtype=np.float64).reshape(len(measured), -1)
    predicted = np.asarray(predicted, dtype=np.float64).reshape(len(predicted), -1)
    per_target = []
    for t in range(measured.shape[1]):
        known = np.isfinite(measured[:, t])
        y, p = measured[known, t], predicted[known, t]
        per_target.append({
            "pearson": _correlation(pearsonr, p, y), "spearman": _correlation(spearmanr, p, y),
            "r2": float(r2_score(y, p)) if len(y) > 1 else 0.0,
            "mse": float(mean_squared_error(y, p)) if len(y) else 0.0,
        })
    out = {name: float(np.mean([m[name] for m in per_target])) for name in METRICS}
    if len(per_target) > 1:
        for name, metrics in zip(target_names, per_target):
            out.update({f"{metric}:{name}": value for metric, value in metrics.items()})
    return out


@dataclass(frozen=True)
class LinearFit:
    """A ridge on clipped, centred, scaled features: ``((clip(X, low, high) - mean) / scale) @ coef.T + intercept``."""

    low: np.ndarray
    high: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray
    alpha: np.ndarray
    standardised: bool
    loo_mse: float

    def transform(self, features: np.ndarray) -> np.ndarray:
        return (np.clip(np.asarray(features, dtype=np.float64), self.low, self.high) - self.mean) / self.scale

    def predict(self, features: np.ndarray) -> np.ndarray:
        return self.transform(features) @ self.coef.T + self.intercept


_FITS: dict[bytes, LinearFit] = {}
_FITS_KEPT = 4


def fit_linear(features: np.ndarray, values: np.ndarray, ddof: int = 0) -> LinearFit:
    """:func:`tuned_linear`, remembered for the last :data:`_FITS_KEPT` inputs."""
    features = np.ascontiguousarray(features, dtype=np.float64)
    values = np.ascontiguousarray(values, dtype=np.float64).reshape(len(features), -1)
    digest = hashlib.blake2b(digest_size=16)
    for part in (np.array(features.shape + values.shape + (ddof,)), features, values):
        digest.update(part.tobytes())
    key = digest.digest()
    if key not in _FITS:
        if len(_FITS) >= _FITS_KEPT:
            _FITS.pop(next(iter(_FITS)))
        _FITS[key] = tuned_linear(features, values, ddof)
    return _FITS[key]


def tuned_linear(features: np.ndarray, values: np.ndarray, ddof: int = 0) -> LinearFit:
    """``RidgeCV`` over :data:`RIDGE_ALPHAS` on raw or standardised features, whichever has the lower LOO error."""
    features = np.asarray(features, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64).reshape(len(features), -1)
    if not np.isfinite(values).all():
        return _fit_per_target(features, values, ddof)
    mean, sd = features.mean(0), features.std(0, ddof=ddof) if len(features) > ddof else np.ones(features.shape[1])
    best = None
    for standardised, scale in ((False, np.ones_like(mean)), (True, np.where(sd > 0, sd, 1.0))):
        ridge = RidgeCV(alphas=RIDGE_ALPHAS, alpha_per_target=True).fit((features - mean) / scale, values)
        loo = float(np.mean(-np.asarray(ridge.best_score_)))
        if best is None or loo < best.loo_mse - 1e-12 * abs(best.loo_mse):
            best = LinearFit(features.min(0), features.max(0), mean, scale, ridge.coef_.reshape(values.shape[1], -1),
                             np.atleast_1d(ridge.intercept_).astype(np.float64), np.atleast_1d(ridge.alpha_),
                             standardised, loo)
    assert best is not None
    return best


def _fit_per_target(features: np.ndarray, values: np.ndarray, ddof: int) -> LinearFit:
    """:func:`tuned_linear` of each target on its measured rows, as one :class:`LinearFit`."""
    coef, intercept, alpha, loo = [], [], [], []
    for t in range(values.shape[1]):
        known = np.isfinite(values[:, t])
        if known.sum() < 2:
            raise ValueError(f"target {t}: fewer than 2 measured rows to fit a ridge on")
        one = tuned_linear(features[known], values[known, t:t + 1], ddof)
        coef.append(one.coef[0] / one.scale)
        intercept.append(one.intercept[0] - float((one.mean / one.scale) @ one.coef[0]))
        alpha.append(one.alpha[0])
        loo.append(one.loo_mse)
    width = features.shape[1]
    return LinearFit(features.min(0), features.max(0), np.zeros(width), np.ones(width), np.array(coef),
                     np.array(intercept), np.array(alpha), False, float(np.mean(loo)))


def fit_feature_ridge(features: np.ndarray, values: np.ndarray) -> LinearFit:
    """The tuned ridge on precomputed ``features (N, F)`` / ``values (N, T)``."""
    return fit_linear(features, values)


def baseline_predictions(train_sequences: Sequence[str], train_values: np.ndarray, evaluate: Sequence[str], *,
                         motif_features: tuple[np.ndarray, np.ndarray] | None = None,
                         skip: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """``{baseline name: (N, T) predictions on evaluate}``; ``motif_features``: (train, evaluate) motif scores."""
    out = {}
    if RIDGE_NAME not in skip:
        vectorizer = CountVectorizer(analyzer="char", ngram_range=(1, KMER_MAX), lowercase=False, dtype=np.float64)
        ridge = fit_linear(vectorizer.fit_transform(list(train_sequences)).toarray(), train_values)
        counts = vectorizer.transform(list(evaluate)).toarray()
        out[RIDGE_NAME] = np.asarray(ridge.predict(counts), dtype=np.float64).reshape(len(evaluate), -1)
    if motif_features is not None and MOTIF_RIDGE_NAME not in skip:
        motif_ridge = fit_feature_ridge(motif_features[0], train_values)
        out[MOTIF_RIDGE_NAME] = np.asarray(motif_ridge.predict(motif_features[1]), dtype=np.float64).reshape(
            len(evaluate), -1)
    mean = np.broadcast_to(np.nanmean(np.asarray(train_values, dtype=np.float64), axis=0),
                           (len(evaluate), np.shape(train_values)[1]))
    out[MEAN_NAME] = np.array(mean)
    return out
