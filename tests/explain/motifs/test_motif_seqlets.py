"""bioattn's seqlet extraction (bioattn.explain.motif_seqlets) against modisco-lite's on the same input, the
thresholds of padded tracks, and no patching of the library anywhere in bioattn."""
from __future__ import annotations

import numpy as np
import pytest

from bioattn.explain.motif_seqlets import extract_seqlets
from tests.helpers import REPO_ROOT

#: modisco-lite's seqlet extraction settings (its keyword names) and ours
LIBRARY_ARGS = dict(window_size=9, flank=3, suppress=7, target_fdr=0.2, min_passing_windows_frac=0.03,
                    max_passing_windows_frac=0.2, weak_threshold_for_counting_sign=0.8)
OUR_ARGS = dict(window=9, flank=3, suppress=7)


def planted_scores(seed: int, n: int = 60, length: int = 50) -> np.ndarray:
    """``(n, length)`` Laplace noise with an 8-position block of high scores in every third sequence."""
    scores = np.random.default_rng(seed).laplace(0, 0.1, (n, length))
    scores[::3, 20:28] += 1.0
    scores[1::7, 5:12] -= 0.8
    return scores


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_seqlets_are_modisco_lites_on_the_same_input(seed: int) -> None:
    from modiscolite.extract_seqlets import extract_seqlets as library

    scores = planted_scores(seed)
    reference, reference_threshold = library(scores.copy(), **LIBRARY_ARGS)
    ours, threshold = extract_seqlets(scores.copy(), **OUR_ARGS)
    assert threshold == reference_threshold
    assert ours == [(s.example_idx, s.start, s.end) for s in reference]
    assert len(ours) > 20  # the planted blocks are cut


def test_padding_leaves_the_threshold_of_the_unpadded_windows() -> None:
    from modiscolite.extract_seqlets import extract_seqlets as library

    scores = planted_scores(1)
    _, unpadded = library(scores.copy(), **LIBRARY_ARGS)
    _, padded_by_library = library(np.pad(scores, ((0, 0), (15, 15))), **LIBRARY_ARGS)
    seqlets, threshold = extract_seqlets(np.pad(scores, ((0, 0), (15, 15))), pad=15, **OUR_ARGS)
    assert threshold == unpadded != padded_by_library  # the padding would have moved the library's threshold
    assert all(end - 3 > 15 and start + 3 < 65 for _, start, end in seqlets)  # no seqlet of padding alone


def test_nothing_in_bioattn_patches_another_library() -> None:
    package = REPO_ROOT / "bioattn"
    patching = [str(path.relative_to(package)) for path in package.rglob("*.py")
                if "mock" in path.read_text(encoding="utf-8").replace("unmocked", "")]
    assert patching == []
