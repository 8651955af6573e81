"""Planted-motif inputs shared by the motif tests: sequences with known motifs and hypothetical contributions that
point at exactly those bases."""
from __future__ import annotations

from typing import Callable

import numpy as np


def planted_contributions(n: int, length: int, plan: Callable[[int], tuple[str, int]],
                          seed: int = 0) -> tuple[list[str], np.ndarray]:
    """``n`` random sequences of ``length`` nt with ``plan(row) -> (motif, start)`` planted, and hypothetical
    contributions ``(n, length, 4)``: +1 on the planted bases (-1/3 on the other three), noise of sd 0.02
    elsewhere."""
    rng = np.random.default_rng(seed)
    sequences, values = [], rng.normal(0, 0.02, (n, length, 4)).astype(np.float32)
    for row in range(n):
        letters = list(rng.choice(list("ACGT"), length))
        motif, start = plan(row)
        letters[start : start + len(motif)] = motif
        for offset, base in enumerate(motif):
            values[row, start + offset] = -1 / 3
            values[row, start + offset, "ACGT".index(base)] = 1.0
        sequences.append("".join(letters))
    return sequences, values
