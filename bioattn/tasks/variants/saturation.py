"""Saturation mutagenesis maps: every possible SNV of a region scored, as a table and as a heatmap (position x
alternative base) under a logo of the reference whose letter heights are minus the mean effect of mutating them."""
from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import numpy as np

from bioattn.errors import UserInputError
from bioattn.tasks.variants.records import Variant, VariantSet

BASES = "ACGT"
#: Records drawn at most in one saturation figure (one heatmap row-pair per record).
MAX_DRAWN = 12
_REGION = re.compile(r"^(?P<chrom>.+):(?P<start>[\d,]+)-(?P<end>[\d,]+)$")


def parse_region(text: str, lengths: dict[str, int]) -> tuple[str, int, int]:
    """``chrom:start-end`` (1-based, inclusive) → ``(chrom, start, end)``, checked against the reference."""
    match = _REGION.match(text.strip())
    if match is None:
        if text in lengths:
            return text, 1, lengths[text]
        raise UserInputError(f"--region {text!r}: expected CHROM:START-END (1-based, inclusive) or a record name")
    chrom, start, end = match["chrom"], int(match["start"].replace(",", "")), int(match["end"].replace(",", ""))
    if chrom not in lengths:
        raise UserInputError(f"--region {text!r}: contig {chrom!r} is not in the reference FASTA")
    if not 1 <= start <= end <= lengths[chrom]:
        raise UserInputError(f"--region {text!r}: not within {chrom} (1-{lengths[chrom]}, start <= end)")
    return chrom, start, end


def saturation_variants(reference: Any, region: str | None = None) -> VariantSet:
    """Every SNV (none at N) of ``region`` or of every record, position by position, alternatives in ACGT order."""
    lengths = {name: len(reference[name]) for name in reference.keys()}
    spans = [parse_region(region, lengths)] if region else [(name, 1, n) for name, n in lengths.items()]
    out = VariantSet([], "saturation")
    for chrom, start, end in spans:
        seq = str(reference[chrom][start - 1 : end]).upper()
        for offset, ref in enumerate(seq):
            if ref not in BASES:
                continue
            pos = start + offset
            out.records += 1
            for allele, alt in enumerate(b for b in BASES if b != ref):
                out.variants.append(Variant(chrom, pos, ref, alt, out.records - 1, allele, f"{chrom}:{pos}"))
    if not out.variants:
        raise UserInputError(f"--region {region}: no A/C/G/T bases to mutate")
    return out


def effect_matrix(table: Any, chrom: str, column: str = "delta") -> tuple[np.ndarray, np.ndarray, str]:
    """``(positions (L,), matrix (4, L), reference letters)`` of one contig; the reference base's own cell is 0."""
    rows = table[table["chrom"] == chrom]
    positions = np.sort(rows["pos"].unique())
    index = {p: i for i, p in enumerate(positions)}
    matrix = np.zeros((4, len(positions)))
    letters = ["N"] * len(positions)
    cols = rows["pos"].map(index).to_numpy()
    matrix[rows["alt"].map(BASES.index).to_numpy(), cols] = rows[column].to_numpy()
    for p, r in zip(rows["pos"], rows["ref"]):
        letters[index[p]] = r
    return positions, matrix, "".join(letters)


def draw_saturation(table: Any, path: str | Path, *, column: str = "delta", title: str = "") -> Path:
    """:func:`saturation_figure` written atomically as PNG."""
    from bioattn.io import save_figure
    return save_figure(saturation_figure(table, column=column, title=title), path)


#: The reference base's own cell, and the hatch over positions not mutated (N).
REFERENCE_COLOUR = "0.72"
UNMUTATED_HATCH = "////"


def saturation_figure(table: Any, *, column: str = "delta", title: str = "") -> Any:
    """The matplotlib ``Figure``: one logo + heatmap pair per contig (at most :data:`MAX_DRAWN`), on one colour and
    one logo scale."""
    import logomaker
    import matplotlib
    matplotlib.use("Agg")
    import pandas as pd
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch, Rectangle
    chroms = list(dict.fromkeys(table["chrom"]))[:MAX_DRAWN]
    records = [_record_cells(table, chrom, column) for chrom in chroms]
    widest = max(len(span) for span, _, _, _ in records)
    figure = Figure(figsize=(min(4 + widest * 0.06, 40), 3.2 * len(chroms)), constrained_layout=True)
    grids = figure.add_gridspec(2 * len(chroms), 2, height_ratios=[1, 1.4] * len(chroms), width_ratios=[40, 1])
    limit = float(np.nanmax(np.abs(table[column].to_numpy()))) or 1.0
    heights = [np.where(np.isnan(m).all(axis=0), 0.0, -np.nansum(m, axis=0) / 3.0) for _, m, _, _ in records]
    low, high = min(0.0, *(h.min() for h in heights)), max(0.0, *(h.max() for h in heights))
    pad = 0.05 * ((high - low) or 1.0)
    cmap = matplotlib.colormaps["RdBu_r"].with_extremes(bad=REFERENCE_COLOUR)
    if len(chroms) > 1:
        figure.suptitle(f"{len(chroms)} records on one logo scale and one colour scale", x=0.99, ha="right",
                        fontsize="small")
    for k, (chrom, (span, matrix, letters, unmutated)) in enumerate(zip(chroms, records)):
        first, last = int(span[0]), int(span[-1])
        logo_ax = figure.add_subplot(grids[2 * k, 0])
        logo = pd.DataFrame(0.0, index=span, columns=list(BASES))  # mean effect of mutating the base, sign flipped
        for position, letter, height in zip(span, letters, heights[k]):
            if letter in BASES:
                logo.loc[position, letter] = height
        logomaker.Logo(logo, ax=logo_ax, color_scheme="classic")
        logo_ax.set_xlim(first - 0.5, last + 0.5)
        logo_ax.set_ylim(low - pad, high + pad)
        logo_ax.set_xticks([])
        logo_ax.set_ylabel("-mean Δ")
        note = f" ({len(unmutated)} N position{'s' if len(unmutated) != 1 else ''} not mutated, hatched)" if len(
            unmutated) else ""
        logo_ax.set_title(f"{title + ': ' if title else ''}{chrom}:{first}-{last}{note}", loc="left")
        heat_ax = figure.add_subplot(grids[2 * k + 1, 0])
        image = heat_ax.imshow(np.ma.masked_invalid(matrix), aspect="auto", cmap=cmap, vmin=-limit, vmax=limit,
                               interpolation="nearest", extent=(first - 0.5, last + 0.5, 3.5, -0.5))
        for ax, bottom, height in ((heat_ax, -0.5, 4.0), (logo_ax, low - pad, high - low + 2 * pad)):
            for start, length in _runs(unmutated):
                ax.add_patch(Rectangle((start - 0.5, bottom), length, height, fill=False, hatch=UNMUTATED_HATCH,
                                       edgecolor="0.35", linewidth=0))
        heat_ax.set_yticks(range(4), list(BASES))
        ticks = _round_ticks(first, last)
        heat_ax.set_xticks(ticks, [str(t) for t in ticks])
        heat_ax.set_xlim(first - 0.5, last + 0.5)
        heat_ax.set_xlabel(f"position on {chrom} (1-based)")
        heat_ax.set_ylabel("alt base")
        handles = [Patch(facecolor=REFERENCE_COLOUR, edgecolor="none", label="reference base (no SNV)")]
        if len(unmutated):
            handles.append(Patch(facecolor=REFERENCE_COLOUR, edgecolor="0.35", linewidth=0, hatch=UNMUTATED_HATCH,
                                 label="N: not mutated"))
        heat_ax.legend(handles=handles, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=len(handles),
                       fontsize="small", frameon=False, borderaxespad=0.1)
        colour_ax = figure.add_subplot(grids[2 * k + 1, 1])
        figure.colorbar(image, cax=colour_ax, label=f"{column} (alt - ref)")
    return figure


def _record_cells(table: Any, chrom: str, column: str) -> tuple[np.ndarray, np.ndarray, str, np.ndarray]:
    """``(span (L,), matrix (4, L), letters, unmutated positions)`` of one contig, first to last scored position;
    NaN where there is no SNV."""
    rows = table[table["chrom"] == chrom]
    scored = np.sort(rows["pos"].unique()).astype(int)
    span = np.arange(scored[0], scored[-1] + 1)
    matrix = np.full((4, len(span)), np.nan)
    matrix[rows["alt"].map(BASES.index).to_numpy(), rows["pos"].to_numpy().astype(int) - span[0]] = rows[column].to_numpy()
    letters = ["N"] * len(span)
    for position, ref in zip(rows["pos"], rows["ref"]):
        letters[int(position) - span[0]] = ref
    return span, matrix, "".join(letters), np.setdiff1d(span, scored)


def _round_ticks(first: int, last: int, most: int = 10) -> list[int]:
    """The multiples in ``[first, last]`` of the smallest step 1, 2, 5, 10, ... that gives at most ``most``."""
    for exponent in itertools.count():
        for mantissa in (1, 2, 5):
            step = mantissa * 10**exponent
            ticks = list(range(-(-first // step) * step, last + 1, step))  # from the first multiple >= first
            if len(ticks) <= most:
                return ticks
    raise AssertionError("unreachable")


def _runs(positions: np.ndarray) -> list[tuple[int, int]]:
    """``(start, length)`` of each run of consecutive ``positions`` (sorted)."""
    runs: list[tuple[int, int]] = []
    for position in positions:
        if runs and runs[-1][0] + runs[-1][1] == position:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((int(position), 1))
    return runs
