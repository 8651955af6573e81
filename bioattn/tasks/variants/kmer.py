"""The k-mer ridge baseline as a DNA model: k-mer counts (k = 1..5 by default) and ``RidgeCV``, scored in the same
windows as an activity model."""
from __future__ import annotations

from typing import Sequence

import numpy as np

_CODE = np.full(256, -1, dtype=np.int64)
for _i, _b in enumerate(b"ACGT"):
    _CODE[_b] = _i
    _CODE[_b + 32] = _i


def kmer_counts(sequences: Sequence[str], k_max: int = 6) -> np.ndarray:
    """``(N, 4 + 16 + ... + 4**k_max)`` k-mer counts (k-mers with N are not counted)."""
    sizes = [4 ** k for k in range(1, k_max + 1)]
    starts = np.cumsum([0] + sizes[:-1])
    out = np.zeros((len(sequences), sum(sizes)), dtype=np.float32)
    lengths = np.array([len(s) for s in sequences])
    for length in np.unique(lengths):
        rows = np.flatnonzero(lengths == length)
        joined = "".join(sequences[i] for i in rows).encode("ascii")
        codes = _CODE[np.frombuffer(joined, dtype=np.uint8)].reshape(len(rows), length)
        for k, (size, start) in enumerate(zip(sizes, starts), start=1):
            if length < k:
                break
            windows = np.lib.stride_tricks.sliding_window_view(codes, k, axis=1)  # (n, L-k+1, k)
            index = (windows * (4 ** np.arange(k - 1, -1, -1))).sum(axis=2)
            valid = (windows >= 0).all(axis=2)
            flat = (np.arange(len(rows))[:, None] * size + index)[valid]
            counts = np.bincount(flat, minlength=len(rows) * size).reshape(len(rows), size)
            out[rows, start : start + size] = counts
    return out


class KmerRidge:
    """``predict(sequences) -> (N, 1)``; ``input_length``: the window it is scored with (the activity model's)."""

    target_names = ["kmer_ridge"]

    def __init__(self, input_length: int, k_max: int = 5) -> None:
        self.input_length, self.k_max = int(input_length), k_max
        self.model = None

    def fit(self, sequences: Sequence[str], values: np.ndarray) -> "KmerRidge":
        from sklearn.linear_model import RidgeCV
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler
        self.model = make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-1, 5, 13)))
        self.model.fit(kmer_counts(sequences, self.k_max), np.asarray(values, dtype=np.float64))
        return self

    def predict(self, sequences: Sequence[str]) -> np.ndarray:
        return self.model.predict(kmer_counts(list(sequences), self.k_max)).reshape(-1, 1)
