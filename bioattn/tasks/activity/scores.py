"""Regression metrics of the activity task and its same-run baselines (k-mer ridge, mean predictor).

:func:`regression_metrics`: per target Pearson, Spearman (scipy), R² and MSE (scikit-learn); the headline keys
(``pearson``, ``spearman``, ``r2``, ``mse``) are the means over targets, and with several targets each one's own
as ``pearson:<target>`` etc.

Baselines, fitted on the training part of a split and scored like the model, each tuned as a careful
scikit-learn user would tune it (:func:`fit_linear`): ``RidgeCV`` with the penalty chosen per target by efficient
leave-one-out CV over the wide log grid :data:`RIDGE_ALPHAS`, on the features as they are and standardised, the
one with the lower leave-one-out error kept; at prediction every feature is clipped to the range it took on the
training rows (a new sequence cannot push the ridge beyond what those rows support).

- ``k-mer ridge``: counts of every k-mer, k = 1..:data:`KMER_MAX` (scikit-learn ``CountVectorizer``).
- ``motif ridge``: the scores of known motif matrices (the activity model's motif branch features,
  :func:`~bioattn.tasks.activity.branches.motif_feature_matrix`), when the run computed them.
- ``mean``: the training mean of each target (Pearson undefined: reported as 0).

Beside them a run scores its deep model alone (:data:`DEEP_NAME`) when the saved model is a blend. The linear
branches of the model are fitted by the same :func:`fit_linear`, so a branch alone predicts what its baseline does.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy.stats import pearsonr, spearmanr
from dataclasses import dataclass

from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import RidgeCV
from sklearn.metrics import mean_squared_error, r2_score

KMER_MAX = 6
#: Ridge penalties tried (on features as they are and standardised): 10^-3 .. 10^7, four per decade.
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
    """Pearson, Spearman, R² and MSE of ``predicted`` against ``measured`` (both ``(N, T)``): the mean over targets
    under the plain names, each target's own under ``<metric>:<target>`` when T > 1. A missing measurement (NaN:
    a row of another cell type or assay) is left out of its target's numbers."""
    measured, predicted = np.asarray(measured, dtype=np.float64), np.asarray(predicted, dtype=np.float64)
    measured = measured.reshape(len(measured), -1)
    predicted = predicted.reshape(len(predicted), -1)
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
    """A ridge regression on clipped, centred (and, when ``standardised``, scaled) features: ``predict(X)`` is
    ``((clip(X, low, high) - mean) / scale) @ coef.T + intercept``, ``(N, T)``. ``alpha``: the penalty chosen per
    target; ``loo_mse``: its mean leave-one-out squared error (in the units of the values it was fitted on)."""

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
    """:func:`tuned_linear`, remembered for the last :data:`_FITS_KEPT` inputs: a run fits the same ridge on the same
    rows more than once (a part alone, then inside the blend), and on 10k+ rows × 8k motif scores each fit is
    minutes of eigendecomposition."""
    import hashlib

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
    """The tuned ridge of the module docstring on ``features (N, F)`` / ``values (N, T)``: ``RidgeCV`` over
    :data:`RIDGE_ALPHAS` (per target) on the raw and on the standardised features (sd with ``ddof``), the lower
    leave-one-out error kept (raw on ties); the training range of every feature is stored for clipping. Values
    with missing measurements (NaN) are fitted one target at a time on its measured rows (:func:`_fit_per_target`)."""
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
    """:func:`fit_linear` of each target on the rows that measured it, as one :class:`LinearFit` (each target's
    centre and scale folded into its weights and intercept; the clipping range that of every row)."""
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


class KmerRidge:
    """The k-mer ridge baseline: ``CountVectorizer`` k-mer counts (k = 1..``kmax``) → :func:`fit_linear`."""

    def __init__(self, kmax: int = KMER_MAX) -> None:
        self.vectorizer = CountVectorizer(analyzer="char", ngram_range=(1, kmax), lowercase=False, dtype=np.float64)
        self.linear: LinearFit | None = None

    def fit(self, sequences: Sequence[str], values: np.ndarray) -> "KmerRidge":
        counts = self.vectorizer.fit_transform(list(sequences)).toarray()
        self.linear = fit_linear(counts, values)
        return self

    def predict(self, sequences: Sequence[str]) -> np.ndarray:
        assert self.linear is not None, "fit first"
        return self.linear.predict(self.vectorizer.transform(list(sequences)).toarray())


def fit_kmer_ridge(sequences: Sequence[str], values: np.ndarray) -> KmerRidge:
    """The k-mer ridge of the module docstring fitted on ``sequences`` / ``values (N, T)``; ``.predict(seqs)``
    gives ``(N, T)``."""
    return KmerRidge().fit(sequences, values)


def fit_feature_ridge(features: np.ndarray, values: np.ndarray) -> LinearFit:
    """The ridge of the module docstring on precomputed ``features (N, F)`` / ``values (N, T)``."""
    return fit_linear(features, values)


def baseline_predictions(train_sequences: Sequence[str], train_values: np.ndarray, evaluate: Sequence[str], *,
                         motif_features: tuple[np.ndarray, np.ndarray] | None = None,
                         skip: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """``{baseline name: (N, T) predictions on evaluate}`` for the k-mer ridge, the motif ridge (when
    ``motif_features`` gives the (train, evaluate) scores) and the mean predictor; ``skip``: names not to fit
    (the run has them already)."""
    out = {}
    if RIDGE_NAME not in skip:
        ridge = fit_kmer_ridge(train_sequences, train_values)
        out[RIDGE_NAME] = np.asarray(ridge.predict(list(evaluate)), dtype=np.float64).reshape(len(evaluate), -1)
    if motif_features is not None and MOTIF_RIDGE_NAME not in skip:
        motif_ridge = fit_feature_ridge(motif_features[0], train_values)
        out[MOTIF_RIDGE_NAME] = np.asarray(motif_ridge.predict(motif_features[1]), dtype=np.float64).reshape(
            len(evaluate), -1)
    mean = np.broadcast_to(np.nanmean(np.asarray(train_values, dtype=np.float64), axis=0),
                           (len(evaluate), np.shape(train_values)[1]))
    out[MEAN_NAME] = np.array(mean)
    return out
