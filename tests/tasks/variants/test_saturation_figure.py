"""The saturation figure: reference cells drawn apart from neutral SNVs, ticks at round positions, one logo scale
for every record, and positions never mutated (N) shown and counted rather than silently closed up."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.colors import to_rgba

from bioattn.tasks.variants.saturation import BASES, REFERENCE_COLOUR, draw_saturation, saturation_figure


def _table(records: dict[str, tuple[int, str, float]]) -> pd.DataFrame:
    """Every SNV of each ``name: (first position, reference letters, effect scale)``; no SNV at an N."""
    rng, rows = np.random.default_rng(0), []
    for name, (first, letters, scale) in records.items():
        for offset, ref in enumerate(letters):
            rows += [(name, first + offset, ref, alt, scale * rng.normal()) for alt in BASES if alt != ref and ref != "N"]
    return pd.DataFrame(rows, columns=["chrom", "pos", "ref", "alt", "delta"])


def _axes(figure, ylabel: str) -> list:
    return [ax for ax in figure.axes if ax.get_ylabel() == ylabel]


def test_reference_cells_are_drawn_apart_from_a_neutral_snv(tmp_path: Path) -> None:
    letters = "ACGTTATAAA"
    figure = saturation_figure(_table({"e": (1, letters, 1.0)}))
    (heat,) = _axes(figure, "alt base")
    image = heat.images[0]
    cells = image.get_array()
    for column, ref in enumerate(letters):
        assert [bool(cells.mask[row, column]) for row in range(4)] == [base == ref for base in BASES]
    bad, neutral = np.array(image.cmap.get_bad()), np.array(image.cmap(0.5))
    assert np.allclose(bad, to_rgba(REFERENCE_COLOUR)) and np.abs(bad - neutral).max() > 0.15
    assert "reference base (no SNV)" in [text.get_text() for text in heat.get_legend().get_texts()]
    assert draw_saturation(_table({"e": (1, letters, 1.0)}), tmp_path / "map.png").stat().st_size > 0


def test_ticks_sit_at_round_positions() -> None:
    figure = saturation_figure(_table({"e": (1001, "ACGT" * 9 + "A", 1.0)}))  # positions 1001-1037
    (heat,) = _axes(figure, "alt base")
    assert [int(t) for t in heat.get_xticks()] == [1005, 1010, 1015, 1020, 1025, 1030, 1035]
    assert [t.get_text() for t in heat.get_xticklabels()] == [str(p) for p in range(1005, 1036, 5)]
    assert heat.get_xlim() == (1000.5, 1037.5)  # columns at their genomic positions


def test_every_record_shares_one_logo_scale() -> None:
    figure = saturation_figure(_table({"strong": (1, "ACGTACGTAC", 10.0), "weak": (1, "GGCCGGCCAA", 0.1)}))
    logos = _axes(figure, "-mean Δ")
    assert len(logos) == 2 and logos[0].get_ylim() == logos[1].get_ylim()
    assert "one logo scale" in figure.get_suptitle()


def test_positions_with_n_are_kept_hatched_and_counted() -> None:
    figure = saturation_figure(_table({"e": (101, "ACGTNNACGT", 1.0)}))
    (heat,), (logo,) = _axes(figure, "alt base"), _axes(figure, "-mean Δ")
    cells = heat.images[0].get_array()
    assert cells.shape == (4, 10) and cells.mask[:, 4:6].all()  # positions 105 and 106 are columns of their own
    assert "2 N positions not mutated" in logo.get_title(loc="left")
    assert "N: not mutated" in [text.get_text() for text in heat.get_legend().get_texts()]
    hatched = [p for p in heat.patches if p.get_hatch()]
    assert [(p.get_x(), p.get_width()) for p in hatched] == [(104.5, 2)]
