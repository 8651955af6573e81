"""Head diversity numbers and the explanation figures (files written, bad shapes refused)."""
from __future__ import annotations

import importlib
from pathlib import Path

import matplotlib
import numpy as np
import pytest
import torch

import bioattn.explain.figures
import bioattn.training.curves
from bioattn.errors import UserInputError
from bioattn.explain import (
    head_diversity,
    plot_head_diversity,
    plot_head_maps,
    plot_head_scores,
    plot_orthogonal_slices,
    plot_rollout_track,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _assert_png(path: Path) -> None:
    assert path.is_file()
    assert path.read_bytes()[:8] == PNG_MAGIC
    assert not list(path.parent.glob(f".{path.name}.*")), "temporary file left behind"


def test_identical_heads_have_cosine_one_and_disjoint_heads_zero() -> None:
    first = torch.softmax(torch.randn(5, 5), -1)
    diagonal = torch.eye(5)
    anti = torch.flip(torch.eye(5), dims=[1])  # attends only off the diagonal (odd L: centre overlaps)
    shifted = torch.roll(torch.eye(5), 1, dims=1)  # strictly disjoint from the diagonal
    similarity = head_diversity(torch.stack([first, first, diagonal, shifted]))
    assert similarity.shape == (4, 4)
    torch.testing.assert_close(similarity.diagonal(), torch.ones(4))
    torch.testing.assert_close(similarity[0, 1], torch.tensor(1.0))
    torch.testing.assert_close(similarity[2, 3], torch.tensor(0.0))
    torch.testing.assert_close(similarity, similarity.T)
    # eye and its flip share exactly the centre cell: cosine = 1 / 5
    torch.testing.assert_close(head_diversity(torch.stack([diagonal, anti]))[0, 1], torch.tensor(0.2))


def test_batched_head_diversity_is_mean_of_per_input() -> None:
    batch = torch.softmax(torch.randn(3, 4, 6, 6), -1)
    expected = torch.stack([head_diversity(batch[b]) for b in range(3)]).mean(0)
    torch.testing.assert_close(head_diversity(batch), expected)


def test_head_diversity_refuses_wrong_rank() -> None:
    with pytest.raises(UserInputError, match="one layer"):
        head_diversity(torch.rand(4, 4))


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_figures_are_written(tmp_path: Path) -> None:
    maps = torch.softmax(torch.randn(3, 8, 8), -1)
    _assert_png(plot_head_maps(maps, tmp_path / "heads.png", title="layer 0", reference=np.eye(8),
                               reference_title="contacts", head_scores=[0.1, 0.2, 0.3]))
    _assert_png(plot_head_diversity(head_diversity(maps), tmp_path / "diversity.png"))
    _assert_png(plot_head_scores(np.random.default_rng(0).random((2, 3)), tmp_path / "scores.png", label="P@L/5"))
    _assert_png(plot_rollout_track(np.linspace(0, 1, 8), tmp_path / "track.png", positions=np.arange(-4, 4),
                                   spread=np.full(8, 0.1), sequence="ACGTACGT", spans={"motif": (-2, 0)}))
    volume = np.zeros((6, 7, 8))
    overlay = np.random.default_rng(0).random((6, 7, 8))
    _assert_png(plot_orthogonal_slices(volume, overlay, tmp_path / "sub" / "slices.png", title="ct"))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda p: plot_head_maps(torch.rand(8, 8), p), "3 dimensions"),
        (lambda p: plot_head_maps(torch.rand(2, 8, 8), p, reference=np.eye(7)), "reference"),
        (lambda p: plot_head_maps(torch.rand(2, 8, 8), p, head_scores=[1.0]), "head_scores"),
        (lambda p: plot_head_scores(np.ones(3), p), "2 dimensions"),
        (lambda p: plot_rollout_track(np.ones(4), p, sequence="ACG"), "sequence"),
        (lambda p: plot_rollout_track(np.ones(4), p, spread=np.ones(3)), "spread"),
        (lambda p: plot_rollout_track(np.ones(4), p, others={"b": np.ones(5)}), "others"),
        (lambda p: plot_rollout_track(np.ones(4), p, positions=np.arange(5)), "positions"),
        (lambda p: plot_orthogonal_slices(np.ones((2, 2, 2)), np.ones((2, 2, 3)), p), "overlay"),
        (lambda p: plot_orthogonal_slices(np.ones((2, 2, 2)), np.ones((2, 2, 2)), p, center=(0, 0, 5)), "center"),
    ],
)
def test_bad_inputs_are_refused_and_nothing_is_written(tmp_path: Path, call, message: str) -> None:
    path = tmp_path / "figure.png"
    with pytest.raises(UserInputError, match=message):
        call(path)
    assert not path.exists()


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_importing_and_drawing_leaves_the_users_backend_alone(tmp_path: Path) -> None:
    """A notebook user's backend (e.g. inline) must survive importing bioattn and drawing figures."""
    previous = matplotlib.get_backend()
    matplotlib.use("pdf")  # stands in for any backend the user chose that is not Agg
    try:
        figures = importlib.reload(bioattn.explain.figures)
        curves = importlib.reload(bioattn.training.curves)
        _assert_png(figures.plot_head_maps(torch.rand(2, 6, 6), tmp_path / "heads.png"))
        (tmp_path / "train_log.csv").write_text("step,epoch,phase,loss,lr\n1,0,train,1.0,0.001\n2,0,train,0.5,0.001\n")
        _assert_png(curves.plot_curves(tmp_path))
        from bioattn.explain.motif_report import _logo  # the motif report's logos (logomaker) too

        _logo(torch.eye(4)[[3, 0, 3, 0]].numpy(), tmp_path / "logo.png", title="TATA", ylabel="bits", information=True)
        _assert_png(tmp_path / "logo.png")
        assert matplotlib.get_backend() == "pdf"
    finally:
        matplotlib.use(previous)
