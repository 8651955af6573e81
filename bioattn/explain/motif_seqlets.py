"""TF-MoDISco (``modisco-lite``) on hypothetical contributions, with the seqlet thresholds of the unpadded windows."""
from __future__ import annotations

import math
import sys
import time
import warnings
from typing import Any

import numpy as np

TARGET_FDR = 0.2
MIN_PASSING_WINDOWS_FRAC = 0.03
MAX_PASSING_WINDOWS_FRAC = 0.2
WEAK_THRESHOLD_FOR_COUNTING_SIGN = 0.8
SUBSAMPLE_CAP = 1_000_000


def _smooth(tracks: np.ndarray, window: int) -> np.ndarray:
    """``(N, L - window + 1)`` sums of ``tracks (N, L)`` over every window."""
    cumulative = np.hstack([np.zeros((len(tracks), 1)), np.cumsum(tracks, axis=-1)])
    return cumulative[:, window:] - cumulative[:, :-window]


def _mode_bin(values: np.ndarray) -> tuple[float, float, np.ndarray]:
    counts, edges = np.histogram(values, bins=1000)
    peak = int(np.argmax(counts))
    return edges[peak], edges[peak + 1], values[(edges[peak] < values) & (values < edges[peak + 1])]


def _laplace_null(windows: np.ndarray, samples: int = 10_000, seed: int = 1234) -> tuple[np.ndarray, np.ndarray]:
    """Positive and negative draws from a two-sided Laplace null centred on the mode of ``windows``."""
    values = windows.ravel()
    _, _, top = _mode_bin(values)
    low, high, _ = _mode_bin(top)
    mu = (low + high) / 2
    percentiles = np.arange(5, 100, 5)
    above, below = values[values >= mu], values[values <= mu]
    rate_above = np.max(-np.log(1 - percentiles / 100.0) / (np.percentile(above, percentiles) - mu))
    rate_below = np.max(-np.log(1 - percentiles / 100.0) / np.abs(np.percentile(below, 100 - percentiles) - mu))
    uniforms = np.random.RandomState(seed).uniform(size=(samples, 2))
    positive_side = uniforms[:, 0] < len(above) / (len(above) + len(below))
    drawn = np.where(positive_side, -np.log(1 - uniforms[:, 1]) / rate_above + mu,
                     mu + np.log(1 - uniforms[:, 1]) / rate_below)
    return drawn[drawn >= 0], drawn[drawn < 0]


def _fdr_threshold(values: np.ndarray, null: np.ndarray, *, increasing: bool, target_fdr: float,
                   min_frac_neg: float = 0.95) -> float:
    """The weakest sorted ``values`` whose isotonic precision against ``null`` reaches ``1 - target_fdr``."""
    from sklearn.isotonic import IsotonicRegression
    x = np.concatenate([values, null], axis=0)
    y = np.concatenate([np.ones(len(values)), np.zeros(len(null))], axis=0)
    weight = np.concatenate([np.ones(len(values)), np.ones(len(null)) * (len(values) / len(null))], axis=0)
    model = IsotonicRegression(out_of_bounds="clip", increasing=increasing).fit(x, y, sample_weight=weight)
    min_precision = model.transform([model.X_min_ if increasing else model.X_max_])[0]
    implied_frac_neg = -1 / (1 - (1 / max(min_precision, 1e-7)))
    if implied_frac_neg > 1.0 or implied_frac_neg < min_frac_neg:
        implied_frac_neg = max(min(1.0, implied_frac_neg), min_frac_neg)
    precisions = np.minimum(np.maximum(1 + implied_frac_neg * (1 - (1 / np.maximum(model.transform(values), 1e-7))),
                                       0.0), 1.0)
    precisions[-1] = 1
    return values[precisions >= (1 - target_fdr)][0]


def _bounded(values: np.ndarray, positive: float, negative: float, low: float, high: float) -> tuple[float, float]:
    """The thresholds moved so that between ``low`` and ``high`` of ``values`` pass (by magnitude)."""
    passing = (np.count_nonzero(values >= positive) + np.count_nonzero(values <= negative)) / float(len(values))
    bound = high if passing > high else (low if passing < low else None)
    if bound is None:
        return positive, negative
    positive = np.percentile(a=np.abs(values), q=100 * (1 - bound))
    return positive, -positive


def _cut(scores: np.ndarray, window: int, flank: int, suppress: int) -> list[tuple[int, int, int]]:
    """``(sequence, start, end)`` of every seqlet: each row's best remaining window plus ``flank``, then suppression."""
    length = scores.shape[1]
    coordinates = []
    for row in np.flatnonzero((scores > -np.inf).any(axis=1)).tolist():
        track = scores[row]
        while True:
            peak = int(track.argmax())
            if track[peak] == -np.inf:
                break
            if flank <= peak < length - flank:
                coordinates.append((row, peak - flank, peak + window + flank))
            track[int(max(math.floor(peak + 0.5 - suppress), 0)) : int(min(math.ceil(peak + 0.5 + suppress), length))] = -np.inf
    return coordinates


def extract_seqlets(scores: np.ndarray, *, window: int, flank: int, suppress: int, pad: int = 0,
                    target_fdr: float = TARGET_FDR, min_passing_windows_frac: float = MIN_PASSING_WINDOWS_FRAC,
                    max_passing_windows_frac: float = MAX_PASSING_WINDOWS_FRAC,
                    weak_threshold_for_counting_sign: float = WEAK_THRESHOLD_FOR_COUNTING_SIGN,
                    ) -> tuple[list[tuple[int, int, int]], float]:
    """``scores (N, L)`` → ``([(sequence, start, end)], threshold)``; ``pad`` columns are left out of the thresholds."""
    inner = _smooth(scores[:, pad : scores.shape[1] - pad], window)
    positive_null, negative_null = _laplace_null(inner)
    distribution = np.sort(np.abs(inner).ravel())
    values = inner.ravel()
    if len(values) > SUBSAMPLE_CAP:
        values = np.random.RandomState(1234).choice(a=values, size=SUBSAMPLE_CAP, replace=False)
    positive_values, negative_values = np.sort(values[values >= 0]), np.sort(values[values < 0])[::-1]
    positive = _fdr_threshold(positive_values, positive_null, increasing=True, target_fdr=target_fdr)
    negative = _fdr_threshold(negative_values, negative_null, increasing=False, target_fdr=target_fdr)
    positive, negative = _bounded(np.concatenate([positive_values, negative_values], axis=0), positive, negative,
                                  min_passing_windows_frac, max_passing_windows_frac)
    ranks = [np.sign(t) * np.searchsorted(a=distribution, v=abs(t)) / len(distribution) for t in (positive, negative)]
    track = _smooth(scores, window)
    passing = (track >= positive) | (track <= negative)
    track[passing] = np.abs(track[passing])
    track[~passing] = -np.inf
    track[:, :flank] = -np.inf
    track[:, -flank:] = -np.inf
    weakest = min(min(ranks[0], abs(ranks[1])) - 0.0001, weak_threshold_for_counting_sign)
    return _cut(track, window, flank, suppress), distribution[int(weakest * len(distribution))]


def say(message: str, progress: bool) -> None:
    """``motifs: message`` on stderr when ``progress``."""
    if progress:
        print(f"motifs: {message}", file=sys.stderr, flush=True)


def run_modisco(one_hot: np.ndarray, hypothetical: np.ndarray, settings: Any, pad: int = 0, *,
                progress: bool = False, label: str = "TF-MoDISco") -> list[tuple[str, Any]]:
    """``one_hot, hypothetical (N, L, 4)`` → ``[(name, modisco pattern)]``: ``pos_<k>`` then ``neg_<k>``."""
    from modiscolite.core import Seqlet, TrackSet
    from modiscolite.tfmodisco import seqlets_to_patterns
    settings.check()
    started = time.perf_counter()
    contributions = np.multiply(one_hot, hypothetical)
    track_set = TrackSet(one_hot=one_hot, contrib_scores=contributions, hypothetical_contribs=hypothetical)
    coordinates, threshold = extract_seqlets(contributions.sum(axis=2), window=settings.window, flank=settings.flank,
                                             suppress=int(0.5 * settings.window) + settings.flank, pad=pad)
    seqlets = track_set.create_seqlets([Seqlet(example_idx=row, start=start, end=end, is_revcomp=False)
                                        for row, start, end in coordinates])
    signed: dict[str, list] = {"pos": [], "neg": []}
    for seqlet in seqlets:
        flank = int(0.5 * (len(seqlet) - settings.window))
        summed = np.sum(seqlet.contrib_scores[flank:-flank])
        if summed > threshold:
            signed["pos"].append(seqlet)
        elif summed < -threshold:
            signed["neg"].append(seqlet)
    say(f"{label}: {len(signed['pos'])} positive and {len(signed['neg'])} negative seqlets from {len(one_hot)} "
         f"sequences ({time.perf_counter() - started:.0f} s)", progress)
    found = []
    for prefix, sign in (("pos", 1), ("neg", -1)):
        chosen = signed[prefix][: settings.max_seqlets]
        if len(signed[prefix]) <= settings.min_metacluster_size:
            continue
        say(f"{label}: clustering {len(chosen)} {'positive' if sign > 0 else 'negative'} seqlets "
             f"({settings.n_leiden_runs} Leiden runs) ...", progress)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            patterns = seqlets_to_patterns(
                seqlets=chosen, track_set=track_set, track_signs=sign, n_leiden_runs=settings.n_leiden_runs,
                trim_to_window_size=settings.window + 2 * settings.flank, initial_flank_to_add=settings.flank,
                final_min_cluster_size=settings.final_min_cluster_size)
        found += [(f"{prefix}_{k}", pattern) for k, pattern in enumerate(patterns or [])]
        say(f"{label}: {len(patterns or [])} {'positive' if sign > 0 else 'negative'} patterns "
             f"({time.perf_counter() - started:.0f} s so far)", progress)
    return found
