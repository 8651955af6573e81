"""A run keeps its blend only when the blend beats each of its parts on the same held-out rows; otherwise the best
part, and the summary names it (fold scores built by hand: nothing trains)."""
from __future__ import annotations

import pytest

from bioattn.tasks.activity.branches import choose_kept
from bioattn.tasks.activity.run import kept_text

PARTS = ("deep", "kmers", "motifs")


def folds(blend: list[float], deep: list[float], kmers: list[float], motifs: list[float]) -> list[dict[str, float]]:
    return [{"blend": b, "deep": d, "kmers": k, "motifs": m} for b, d, k, m in zip(blend, deep, kmers, motifs)]


def test_a_blend_that_loses_to_one_part_is_not_kept() -> None:
    # the table: the blend (0.887) was worse than the deep model alone (0.905)
    scores = folds(blend=[0.88, 0.89, 0.89], deep=[0.90, 0.91, 0.905], kmers=[0.80, 0.78, 0.75],
                   motifs=[0.1, -0.3, 0.2])
    kept, means = choose_kept(scores, PARTS)
    assert kept == "deep" and means["blend"] < means["deep"]
    # the k-mer ridge wins: it is kept, even though the blend beats the deep model
    scores = folds(blend=[0.92, 0.93], deep=[0.85, 0.86], kmers=[0.94, 0.95], motifs=[0.7, 0.7])
    assert choose_kept(scores, PARTS)[0] == "kmers"


def test_a_blend_that_only_ties_its_best_part_is_not_kept() -> None:
    scores = folds(blend=[0.9, 0.8], deep=[0.9, 0.8], kmers=[0.5, 0.5], motifs=[0.4, 0.4])
    assert choose_kept(scores, PARTS)[0] == "deep"


def test_a_blend_that_beats_every_part_is_kept() -> None:
    scores = folds(blend=[0.95, 0.93], deep=[0.90, 0.92], kmers=[0.93, 0.91], motifs=[0.80, 0.81])
    kept, means = choose_kept(scores, PARTS)
    assert kept == "blend" and means == pytest.approx({"blend": 0.94, "deep": 0.91, "kmers": 0.92, "motifs": 0.805})


def test_the_summary_names_the_part_that_was_kept_and_why() -> None:
    blend = {"text": "the deep model blended with two ridges"}
    means = {"blend": 0.887, "deep": 0.905, "kmers": 0.80, "motifs": 0.1}
    text = kept_text(blend, {"kept": "deep", "means": means})
    assert text.startswith("the deep model alone (mean pearson 0.905")
    assert "because the blend did not beat it on the same rows (blend 0.887; the k-mer ridge 0.800" in text
    assert text.endswith("the blend was the deep model blended with two ridges")
    assert "kept because it beat each of its parts" in kept_text(blend, {"kept": "blend", "means": {
        "blend": 0.95, "deep": 0.9, "kmers": 0.92, "motifs": 0.8}})
