"""Scans of each pattern's core over the sequences (FIMO, ``memelite``) and the spacers between pattern pairs."""
from __future__ import annotations

import warnings
from typing import Any, Mapping, Sequence

import numpy as np

from bioattn.errors import UserInputError

Pattern = Any


def scan_pattern_sites(patterns: Sequence[Pattern], sequences: Sequence[str], *, threshold: float = 1e-4,
                       offset: int = 0) -> dict[str, list[tuple[int, int, int, str, float]]]:
    """Pattern name → ``[(sequence, start, end, strand, p)]``: FIMO hits (p < ``threshold``) of its core."""
    from memelite import fimo
    if not 0 < threshold <= 1:
        raise UserInputError(f"pattern scan: p-value threshold must be in (0, 1], got {threshold}")
    if not patterns or not sequences:
        return {p.name: [] for p in patterns}
    lengths = {len(s) for s in sequences}
    if len(lengths) != 1:
        raise UserInputError(f"pattern scan needs sequences of one length, got lengths {sorted(lengths)[:5]}")
    one_hot = np.array([[[c == b for c in s.upper()] for b in "ACGT"] for s in sequences], dtype=np.float32)
    motifs = {p.name: np.clip(np.asarray(p.ppm, dtype=float), 1e-3, None).T for p in patterns}
    motifs = {name: ppm / ppm.sum(0, keepdims=True) for name, ppm in motifs.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hits = fimo(motifs, one_hot, threshold=threshold)
    found: dict[str, list[tuple[int, int, int, str, float]]] = {p.name: [] for p in patterns}
    for table in hits:
        columns = ["motif_name", "sequence_name", "start", "end", "strand", "p-value"]
        for name, index, start, end, strand, p in table[columns].itertuples(index=False, name=None):
            found[name].append((int(index), int(start) - offset, int(end) - offset, str(strand), float(p)))
    return found


def box_spacers(upstream: Sequence[tuple], downstream: Sequence[tuple], *, upstream_strand: str = "+",
                downstream_strand: str = "+", gaps: tuple[int, int] = (0, 40)) -> dict[int, int]:
    """Sequence → spacer (downstream start − upstream end) of its best two-box pair within ``gaps``."""
    by_sequence: dict[int, list[tuple]] = {}
    for site in downstream:
        if site[3] == downstream_strand:
            by_sequence.setdefault(site[0], []).append(site)
    best: dict[int, tuple[float, int]] = {}
    for index, start, end, strand, p in upstream:
        if strand != upstream_strand:
            continue
        for _, d_start, _, _, d_p in by_sequence.get(index, []):
            gap = d_start - end
            if gaps[0] <= gap <= gaps[1] and (index not in best or p * d_p < best[index][0]):
                best[index] = (p * d_p, gap)
    return {index: gap for index, (_, gap) in sorted(best.items())}


SCAN_THRESHOLD = 1e-3


def pattern_sense(pattern: Pattern) -> str:
    """The strand on which most of ``pattern``'s seqlets read its consensus (``"+"`` on a tie or without seqlets)."""
    reverse = sum(site[3] == "-" for site in pattern.sites)
    return "-" if reverse > len(pattern.sites) - reverse else "+"


def scan_spacings(patterns: Sequence[Pattern], sequences: Sequence[str], *, groups: Mapping[str, np.ndarray] | None = None,
                  threshold: float = SCAN_THRESHOLD, gaps: tuple[int, int] = (0, 40), min_sequences: int = 5,
                  sites: Mapping[str, Sequence[tuple]] | None = None) -> list[dict]:
    """Spacer rows of every ordered pair of patterns from core scans, most sequences first."""
    if min_sequences < 1:
        raise UserInputError(f"scan spacings: min_sequences must be >= 1, got {min_sequences}")
    if not 0 <= gaps[0] <= gaps[1]:
        raise UserInputError(f"scan spacings: gaps must be 0 <= low <= high, got {gaps}")
    if sites is None:
        sites = scan_pattern_sites(patterns, sequences, threshold=threshold)
    senses = {p.name: pattern_sense(p) for p in patterns}
    rows = []
    for first in patterns:
        for second in patterns:
            if first is second:
                continue
            spacers = box_spacers(sites[first.name], sites[second.name], upstream_strand=senses[first.name],
                                  downstream_strand=senses[second.name], gaps=gaps)
            if len(spacers) < min_sequences:
                continue
            values = np.fromiter(spacers.values(), dtype=int)
            counts = np.bincount(values)
            mode = int(np.argmax(counts))
            row = {"first": first.name, "second": second.name, "first_strand": senses[first.name],
                   "second_strand": senses[second.name], "sequences": len(values)}
            carriers = np.zeros(len(sequences), dtype=bool)
            carriers[list(spacers)] = True
            for name, chosen in (groups or {}).items():
                row[f"fraction_{name}"] = float(carriers[chosen].mean()) if chosen.any() else float("nan")
            row.update(spacer_mode=mode, spacer_median=float(np.median(values)),
                       at_mode=int(counts[max(mode - 1, 0) : mode + 2].sum()))
            rows.append(row)
    return sorted(rows, key=lambda row: -row["sequences"])
