"""The contact map of an MSA run (contact_map.png): the top-L/5 pairs stand apart from the rest, with a legend."""
from __future__ import annotations

import numpy as np

from bioattn.tasks.msa.figures import plot_contact_map


def _points(figure, label: str) -> int:
    axis = figure.axes[0]
    return sum(len(c.get_offsets()) for c in axis.collections if c.get_label() == label)


def test_top_l5_pairs_are_drawn_apart_and_named_in_the_legend(tmp_path) -> None:
    length = 40
    rng = np.random.default_rng(0)
    scores = rng.random((length, length))
    scores = (scores + scores.T) / 2
    distances = rng.uniform(3, 20, (length, length))
    distances = (distances + distances.T) / 2
    figure = plot_contact_map(tmp_path / "map.png", scores, distances)
    assert (tmp_path / "map.png").read_bytes()[:4] == b"\x89PNG"
    legend = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert any(t.startswith("top-L/5") for t in legend) and any(t.startswith("top L/5–L") for t in legend), legend
    top = sum(_points(figure, f"top-L/5, {kind}") for kind in ("correct", "wrong", "no native coordinates"))
    rest = sum(_points(figure, f"top L/5–L, {kind}") for kind in ("correct", "wrong", "no native coordinates"))
    assert (top, rest) == (length // 5, length - length // 5)
    sizes = {c.get_label(): c.get_sizes()[0] for c in figure.axes[0].collections if c.get_label().startswith("top")}
    assert min(v for k, v in sizes.items() if k.startswith("top-L/5")) > max(v for k, v in sizes.items()
                                                                              if k.startswith("top L/5"))
    # without a structure: the two tiers alone
    figure = plot_contact_map(tmp_path / "alone.png", scores, None)
    assert (_points(figure, "top-L/5 predicted"), _points(figure, "top L/5–L predicted")) == (8, 32)
