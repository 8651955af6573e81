"""Where discovered patterns occur beyond their seqlets, and the spacers between them: scans of each pattern's core
over the sequences (FIMO, ``memelite``), read in the sense of most of its seqlets, and the spacer of every pair of
patterns found one upstream of the other (``motif_scan_spacings.tsv`` of the motif report)."""
from __future__ import annotations

import warnings
from typing import Any, Mapping, Sequence

import numpy as np

from bioattn.errors import UserInputError

#: a :class:`~bioattn.explain.motifs.Pattern` (not imported: that module imports this one)
Pattern = Any


def scan_pattern_sites(patterns: Sequence[Pattern], sequences: Sequence[str], *, threshold: float = 1e-4,
                       offset: int = 0) -> dict[str, list[tuple[int, int, int, str, float]]]:
    """Every match of each pattern's core in ``sequences`` (N strings, A C G T N), on both strands: FIMO (memelite)
    with the core's probability matrix, hits with p < ``threshold``.

    Seqlets mark only the sites TF-MoDISco kept (those above its contribution threshold, at most ``max_seqlets`` per
    metacluster, clustered into one pattern among several similar ones); a scan finds the pattern wherever its
    letters are, so it counts the sequences carrying a box regardless of those choices.

    Returns:
        pattern name → ``[(sequence, start, end, strand, p)]``: 0-based half-open core coordinates on the forward
        strand minus ``offset`` (e.g. the TSS index, so positions are relative to it); strand ``"-"`` when the
        reverse complement of the core matches.
    """
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
    """Spacer (nt between the two cores) of a two-box element such as the σ70 −35 and −10 boxes, per sequence.

    upstream, downstream: sites of :func:`scan_pattern_sites` of the two patterns; ``*_strand`` the strand whose hits
    read the box in the element's sense (``"-"`` when a pattern's consensus is the box's reverse complement). In each
    sequence the pair with the upstream core before the downstream one, a gap within ``gaps`` (inclusive) and the
    smallest product of the two p-values is kept. Returns sequence → gap (downstream start − upstream end)."""
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


#: FIMO p-value below which :func:`scan_spacings` counts a pattern's match (a 6-nt core cannot reach 1e-4: 4**-6).
SCAN_THRESHOLD = 1e-3


def pattern_sense(pattern: Pattern) -> str:
    """The strand (``"+"`` or ``"-"``) on which most of ``pattern``'s seqlets read its consensus: the sense in which
    the pattern occurs on the sequences explained (``"-"`` when the consensus is reported as the reverse complement
    of what the sequences carry, as TF-MoDISco may do; ``"+"`` on a tie or without seqlets)."""
    reverse = sum(site[3] == "-" for site in pattern.sites)
    return "-" if reverse > len(pattern.sites) - reverse else "+"


def scan_spacings(patterns: Sequence[Pattern], sequences: Sequence[str], *, groups: Mapping[str, np.ndarray] | None = None,
                  threshold: float = SCAN_THRESHOLD, gaps: tuple[int, int] = (0, 40), min_sequences: int = 5,
                  sites: Mapping[str, Sequence[tuple]] | None = None) -> list[dict]:
    """Spacers between every ordered pair of patterns from scans of their cores over all ``sequences``.

    Seqlet co-occurrence (:func:`pattern_spacings`) counts a pair only where TF-MoDISco cut a seqlet for both boxes;
    here each pattern's core is matched wherever its letters are (:func:`scan_pattern_sites`, FIMO p <
    ``threshold``), read in its sense on these sequences (:func:`pattern_sense`), and for every sequence carrying the
    first pattern upstream of the second with a spacer within ``gaps`` the best pair gives the spacer
    (:func:`box_spacers`). Pairs found in fewer than ``min_sequences`` sequences are left out.

    groups: name → ``(N,)`` bool; each row gets the fraction of each group's sequences carrying the pair.
    sites: precomputed :func:`scan_pattern_sites` output (else scanned here).

    Returns rows ``{first, second, first_strand, second_strand, sequences, fraction_<group>..., spacer_mode,
    spacer_median, at_mode}`` (``at_mode``: sequences whose spacer is within 1 nt of the mode), most sequences first.
    """
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
