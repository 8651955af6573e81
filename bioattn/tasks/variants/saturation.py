"""Saturation mutagenesis maps: every possible SNV of a region scored in one call, as a table and as the heatmap
MPRA papers show (position x alternative base, coloured by the change in the model's score, with the reference
sequence drawn above as a logo whose letter heights are the mean effect of mutating that base, sign flipped: a
letter standing up supports the model's output, one hanging down works against it).
"""
from __future__ import annotations

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
    """Every SNV (3 per base; none at N) of ``region`` or of every record of ``reference``, position by position,
    alternatives in A, C, G, T order."""
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
    """``(positions (L,), matrix (4, L), reference letters)`` of one contig of a saturation table; the reference
    base's own cell is 0."""
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
    """The heatmap(s) of a saturation table (one logo + heatmap pair per contig, at most :data:`MAX_DRAWN`), written
    atomically as PNG."""
    import logomaker
    import matplotlib

    matplotlib.use("Agg")
    import pandas as pd
    from matplotlib.figure import Figure

    from bioattn.io import save_figure

    chroms = list(dict.fromkeys(table["chrom"]))[:MAX_DRAWN]
    widest = max(len(table[table["chrom"] == c]["pos"].unique()) for c in chroms)
    figure = Figure(figsize=(min(4 + widest * 0.06, 40), 3.2 * len(chroms)), constrained_layout=True)
    grids = figure.add_gridspec(2 * len(chroms), 2, height_ratios=[1, 1.4] * len(chroms), width_ratios=[40, 1])
    limit = float(np.nanmax(np.abs(table[column].to_numpy()))) or 1.0
    for k, chrom in enumerate(chroms):
        positions, matrix, letters = effect_matrix(table, chrom, column)
        logo_ax = figure.add_subplot(grids[2 * k, 0])
        heights = -matrix.sum(axis=0) / 3.0  # mean effect of mutating the base, sign flipped
        logo = pd.DataFrame(0.0, index=np.arange(len(letters)), columns=list(BASES))
        for i, letter in enumerate(letters):
            if letter in BASES:
                logo.loc[i, letter] = heights[i]
        logomaker.Logo(logo, ax=logo_ax, color_scheme="classic")
        logo_ax.set_xlim(-0.5, len(letters) - 0.5)
        logo_ax.set_xticks([])
        logo_ax.set_ylabel("-mean Δ")
        logo_ax.set_title(f"{title + ': ' if title else ''}{chrom}:{positions[0]}-{positions[-1]}", loc="left")
        heat_ax = figure.add_subplot(grids[2 * k + 1, 0])
        image = heat_ax.imshow(matrix, aspect="auto", cmap="RdBu_r", vmin=-limit, vmax=limit, interpolation="nearest")
        heat_ax.set_yticks(range(4), list(BASES))
        ticks = np.linspace(0, len(positions) - 1, min(10, len(positions))).astype(int)
        heat_ax.set_xticks(ticks, [str(positions[t]) for t in ticks])
        heat_ax.set_xlabel(f"position on {chrom} (1-based)")
        heat_ax.set_ylabel("alt base")
        colour_ax = figure.add_subplot(grids[2 * k + 1, 1])
        figure.colorbar(image, cax=colour_ax, label=f"{column} (alt - ref)")
    return save_figure(figure, path)

