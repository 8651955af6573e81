"""The linear branches of the activity model cannot run away: their features are clipped to the range they took on
the training rows (stored with the model, so a saved and reloaded model clips too), the ridges behind them and
behind the same-run baselines are tuned by leave-one-out CV, and a model saved before the ranges existed loads and
predicts as it always did."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from bioattn.data.dna import encode
from bioattn.models.activity import ActivityRegressor, kmer_counts
from bioattn.tasks.activity.branches import MotifSet, blend_parts, motif_feature_matrix
from bioattn.tasks.activity.scores import RIDGE_ALPHAS, fit_feature_ridge

SITE = "TGACTCA"


def rows(n: int, seed: int, length: int = 40) -> tuple[torch.Tensor, np.ndarray]:
    """Sequences with 0-2 copies of SITE (never more), activity = the number of copies."""
    rng = np.random.default_rng(seed)
    ids, values = [], []
    for _ in range(n):
        sequence = list(rng.choice(list("ACGT"), length))
        copies = int(rng.integers(0, 3))
        for slot in range(copies):
            sequence[slot * 12 + 2 : slot * 12 + 9] = SITE
        ids.append(encode("".join(sequence)))
        values.append([copies + 0.05 * rng.normal()])
    return torch.as_tensor(np.stack(ids), dtype=torch.long), np.array(values)


def site_set() -> MotifSet:
    site = np.full((4, len(SITE)), -2.0)
    for column, base in enumerate(SITE):
        site["ACGT".index(base), column] = 1.5
    return MotifSet({"ids": ["site"], "names": ["SITE"], "widths": [len(SITE)], "bins": 1, "source": "test"}, [site])


def deep() -> ActivityRegressor:
    return ActivityRegressor(input_length=40, channels=8, embed_dim=8, num_heads=2, num_layers=1, target_mean=[1.0],
                             target_sd=[0.8]).eval()


def far_out() -> torch.Tensor:
    """Five copies of SITE end to end: more than any training row holds, every k-mer count of the site beyond range."""
    return torch.as_tensor(encode((SITE * 5).ljust(40, "A")), dtype=torch.long)[None]


def test_a_linear_branch_fed_an_out_of_range_input_stays_within_its_clipped_range(tmp_path: Path) -> None:
    tokens, values = rows(120, seed=0)
    for part in ("kmers", "motifs"):
        ridge = blend_parts(deep(), tokens, values, {part: 1.0}, motif_set=site_set(), kmer_max=3)
        branch = "kmer" if part == "kmers" else "motif"
        raw = (kmer_counts(far_out(), 3) if part == "kmers" else ridge.raw_motif_scores(far_out()))
        high = getattr(ridge, f"{branch}_high")
        assert bool((raw > high).any())  # the input lies outside the training range ...
        clipped = torch.minimum(torch.maximum(raw, getattr(ridge, f"{branch}_low")), high)
        linear = getattr(ridge, f"{branch}_linear")
        with torch.no_grad():
            expected = linear((clipped - getattr(ridge, f"{branch}_mean")) / getattr(ridge, f"{branch}_scale"))
        expected = expected * ridge.target_sd + ridge.target_mean
        # ... and the branch predicts what it predicts at the edge of that range, as does the model saved and reloaded
        np.testing.assert_allclose(ridge.predict_tokens(far_out()), expected.double().numpy(), rtol=1e-5)
        ridge.save_pretrained(tmp_path / part)
        reloaded = ActivityRegressor.from_pretrained(tmp_path / part)
        np.testing.assert_allclose(reloaded.predict_tokens(far_out()), ridge.predict_tokens(far_out()), rtol=1e-6)
        # a bound that holds for every input: the largest the branch gives over the box of training ranges
        weights = linear.weight.detach()[0]
        low_z = (getattr(ridge, f"{branch}_low") - getattr(ridge, f"{branch}_mean")) / getattr(ridge, f"{branch}_scale")
        high_z = (high - getattr(ridge, f"{branch}_mean")) / getattr(ridge, f"{branch}_scale")
        bound = float(linear.bias[0] + torch.maximum(weights * low_z, weights * high_z).sum())
        with torch.no_grad():
            assert float(ridge.standardised(far_out())[0][0, 0]) <= bound + 1e-5


def test_the_same_run_ridge_clips_its_features_and_takes_its_penalty_from_a_wide_grid() -> None:
    tokens, values = rows(120, seed=1)
    features = motif_feature_matrix(tokens, site_set())
    ridge = fit_feature_ridge(features, values)
    assert min(RIDGE_ALPHAS) <= 1e-3 and max(RIDGE_ALPHAS) >= 1e7 and float(ridge.alpha[0]) in RIDGE_ALPHAS
    beyond = features.max(0, keepdims=True) * 100
    np.testing.assert_allclose(ridge.predict(beyond), ridge.predict(features.max(0, keepdims=True)))


def test_a_model_saved_without_feature_ranges_loads_and_reads_its_features_unclipped(tmp_path: Path) -> None:
    torch.manual_seed(0)
    old = ActivityRegressor(input_length=40, channels=8, embed_dim=8, num_heads=2, num_layers=1, kmer_branch=2).eval()
    with torch.no_grad():
        old.kmer_linear.weight.fill_(0.5)
    old.save_pretrained(tmp_path / "old")
    assert "clip_features" not in old.config
    reloaded = ActivityRegressor.from_pretrained(tmp_path / "old")
    assert not reloaded.clip_features and not hasattr(reloaded, "kmer_low")
    np.testing.assert_allclose(reloaded.predict_tokens(far_out()), old.predict_tokens(far_out()), rtol=1e-6)
    counts = kmer_counts(far_out(), 2)
    np.testing.assert_allclose(reloaded.kmer_features(far_out()).numpy(), counts.numpy())  # unclipped, as trained
