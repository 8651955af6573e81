"""The activity model's motif branch: its scores equal a plain PWM scan written here, both strands count, the parts
split the element as documented, padding and N change nothing, and the matrices travel with the saved weights."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from bioattn.data.dna import encode
from bioattn.data.motif_db import MotifDatabase, load_motif_database, log_odds_matrices
from bioattn.models.activity import ActivityRegressor, motif_scores

BASES = "ACGT"


def scan(sequence: str, matrix: np.ndarray, bins: int) -> list[tuple[float, float]]:
    """Reference: per part, (max(0, best score), log(1 + sum exp(score))) over window starts, better strand."""
    length, width = len(sequence), matrix.shape[1]
    onehot = np.zeros((4, length + width))
    for i, base in enumerate(sequence):
        if base in BASES:
            onehot[BASES.index(base), i] = 1
    reverse = matrix[::-1, ::-1]
    scores = [max((onehot[:, p : p + width] * matrix).sum(), (onehot[:, p : p + width] * reverse).sum())
              for p in range(length)]
    parts = []
    for b in range(bins):
        part = [s for p, s in enumerate(scores) if (p * bins) // length == b]
        parts.append((max(0.0, max(part)) if part else 0.0, float(np.log1p(np.exp(part).sum())) if part else 0.0))
    return parts


def random_matrices(rng: np.random.Generator, widths: list[int]) -> list[np.ndarray]:
    return [rng.normal(size=(4, w)) * 2 for w in widths]


def tokens(sequences: list[str], length: int) -> torch.Tensor:
    out = torch.zeros(len(sequences), length, dtype=torch.long)
    for i, s in enumerate(sequences):
        out[i, : len(s)] = torch.from_numpy(encode(s))
    return out


@pytest.mark.parametrize("bins", [1, 2, 3])
def test_motif_scores_equal_a_plain_scan_on_both_strands(bins: int) -> None:
    rng = np.random.default_rng(bins)
    widths = [7, 3, 11, 6, 3]  # not in width order, two of one width: the features keep the given order
    matrices = random_matrices(rng, widths)
    padded = torch.zeros(len(widths), 4, max(widths))
    for i, m in enumerate(matrices):
        padded[i, :, : m.shape[1]] = torch.as_tensor(m, dtype=torch.float32)
    sequences = ["".join(rng.choice(list("ACGTN"), n, p=[0.24, 0.24, 0.24, 0.24, 0.04])) for n in (30, 17, 30, 9, 2)]
    got = motif_scores(tokens(sequences, 30), padded, widths, bins).numpy()  # length 2 < bins 3: an empty part
    assert got.shape == (5, 2 * bins * len(widths))
    for row, sequence in enumerate(sequences):
        for index, matrix in enumerate(matrices):
            for part, (best, soft) in enumerate(scan(sequence, matrix, bins)):
                base = part * 2 * len(widths)
                assert got[row, base + index] == pytest.approx(best, abs=1e-4)
                assert got[row, base + len(widths) + index] == pytest.approx(soft, abs=1e-4)


def test_a_site_on_the_reverse_strand_scores_like_one_on_the_forward_strand() -> None:
    matrix = np.full((4, 6), -3.0)
    for column, base in enumerate("TATAAA"):
        matrix[BASES.index(base), column] = 2.0
    padded = torch.as_tensor(matrix, dtype=torch.float32)[None]
    background = "C" * 20
    forward = background[:7] + "TATAAA" + background[13:]
    reverse = background[:7] + "TTTATA" + background[13:]
    scores = motif_scores(tokens([forward, reverse, background], 20), padded, [6]).numpy()
    assert scores[0, 0] == pytest.approx(12.0) and scores[1, 0] == pytest.approx(12.0)
    assert scores[2, 0] == 0.0  # no site: the best score is floored at 0


def test_padding_does_not_change_the_scores() -> None:
    rng = np.random.default_rng(1)
    widths = [5, 8]
    padded = torch.zeros(2, 4, 8)
    for i, m in enumerate(random_matrices(rng, widths)):
        padded[i, :, : m.shape[1]] = torch.as_tensor(m, dtype=torch.float32)
    sequence = "".join(rng.choice(list("ACGT"), 25))
    alone = motif_scores(tokens([sequence], 25), padded, widths, 2)
    in_a_longer_batch = motif_scores(tokens([sequence, sequence + "ACGTACGTAC"], 40), padded, widths, 2)[:1]
    torch.testing.assert_close(alone, in_a_longer_batch)


def test_the_motif_branch_saves_its_matrices_and_predicts_the_same_after_loading(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    widths = [4, 9, 6]
    model = ActivityRegressor(input_length=30, channels=8, embed_dim=8, num_heads=2, num_layers=1,
                              motifs={"ids": ["m1", "m2", "m3"], "names": ["A", "B", "C"], "widths": widths, "bins": 2})
    model.set_motif_matrices(random_matrices(rng, widths))
    torch.nn.init.normal_(model.motif_linear.weight)
    sequences = ["".join(rng.choice(list("ACGT"), 30)) for _ in range(5)]
    before = model.eval().predict(sequences)
    model.save_pretrained(tmp_path)
    loaded = ActivityRegressor.from_pretrained(tmp_path)
    np.testing.assert_allclose(loaded.predict(sequences), before, rtol=1e-6)
    assert loaded.motifs["names"] == ["A", "B", "C"] and loaded.motifs["bins"] == 2
    with pytest.raises(ValueError, match=r"expected \(4, 9\)"):
        loaded.set_motif_matrices([np.zeros((4, 4)), np.zeros((4, 8)), np.zeros((4, 6))])


def test_log_odds_smooth_a_matrix_from_few_sites_more_than_one_from_many() -> None:
    ppm = np.array([[1.0], [0.0], [0.0], [0.0]])
    database = MotifDatabase("t", ["few", "many"], ["few", "many"], ["", ""], [ppm, ppm], sites=[4.0, 4000.0])
    few, many = log_odds_matrices(database)
    assert few[0, 0] < many[0, 0] <= 2.0  # log2(1 / 0.25) = 2 is the ceiling
    assert few[1, 0] > many[1, 0]  # an unseen base is penalised less when the matrix rests on few sites


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_jaspar_ships_offline_with_site_counts() -> None:
    database = load_motif_database("jaspar")
    assert len(database) > 500 and len(database.sites) == len(database) and min(database.sites) >= 1
