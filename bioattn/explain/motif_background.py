"""Patterns that composition alone yields: the motif pipeline run again on a composition-matched background.

Every sequence is shuffled once, keeping its dinucleotide counts (tangermeme's ``dinucleotide_shuffle``,
:func:`~bioattn.explain.marginalize.shuffled_backgrounds`), and the shuffles go through the same pipeline as the
sequences (the model's hypothetical contributions, TF-MoDISco, :func:`~bioattn.explain.motifs.discover_patterns`).
A pattern of the real sequences that a background pattern matches (TOMTOM q < ``q_threshold``) and whose core
is not enriched in the sequences over their shuffles (found in fewer than :data:`MIN_ENRICHMENT` times as many) is
what the model reads in any sequence of that composition: it is flagged ``composition`` and not listed as a
finding. A planted or real element is broken up by the shuffle: the shuffles may still yield a weaker look-alike
(a planted TATAAA's letters recur in some shuffles), but its core is then far more frequent in the sequences.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from bioattn.explain.motif_db import DEFAULT_Q

if TYPE_CHECKING:
    from bioattn.explain.motif_db import MotifDatabase
    from bioattn.explain.motifs import ModiscoSettings, Pattern

#: A pattern whose core occurs in fewer than this many times as many sequences as shuffles is not enriched over
#: composition. The sequences holding it are counted by a scan of its core (FIMO), not by seqlets: each run's seqlet
#: thresholds follow its own contributions, so a background (weaker) cuts seqlets at weaker sites.
MIN_ENRICHMENT = 1.5
#: How the background is described in reports.
BACKGROUND = "dinucleotide shuffles"


def background_patterns(sequences: Sequence[str], attribute: Callable[[list[str]], np.ndarray], *,
                        settings: "ModiscoSettings | None" = None, tss_index: int | None = None, seed: int = 0,
                        progress: bool = False) -> tuple[list[str], list["Pattern"]]:
    """``(shuffles, patterns)``: one dinucleotide shuffle of each of ``sequences`` and the patterns TF-MoDISco finds
    in ``attribute(shuffles)`` (hypothetical contributions ``(N, L, 4)``, computed as for the real sequences)."""
    from bioattn.explain.marginalize import shuffled_backgrounds
    from bioattn.explain.motifs import discover_patterns

    shuffles = shuffled_backgrounds(sequences, seed=seed)
    patterns = discover_patterns(shuffles, attribute(shuffles), tss_index=tss_index, settings=settings,
                                 progress=progress, label="background TF-MoDISco")
    return shuffles, patterns


def flag_composition(patterns: Sequence["Pattern"], background: Sequence["Pattern"], sequences: Sequence[str],
                     shuffles: Sequence[str], *, decoys: "MotifDatabase | None" = None, q_threshold: float = DEFAULT_Q,
                     min_enrichment: float = MIN_ENRICHMENT) -> None:
    """Set ``pattern.background`` on every pattern of ``patterns`` (found in ``sequences``) that a pattern of
    ``background`` (found in ``shuffles``) matches at TOMTOM q < ``q_threshold`` while its core is found (FIMO,
    :func:`~bioattn.explain.motif_scan.scan_pattern_sites`) in fewer than ``min_enrichment`` times as many sequences
    as shuffles: ``{"name", "consensus", "seqlets", "p", "q", "in_sequences", "in_shuffles"}`` of the matching
    background pattern; the others get ``None``.

    TOMTOM's null for a query column is built from every target column, so the background patterns are compared
    among ``decoys`` (the default: JASPAR CORE vertebrates, as shipped), which shape that null only: the q-values
    (Benjamini-Hochberg) are over the background patterns."""
    from memelite import tomtom
    from scipy.stats import false_discovery_control

    from bioattn.explain.motif_db import load_motif_database
    from bioattn.explain.motif_scan import SCAN_THRESHOLD, scan_pattern_sites

    for pattern in patterns:
        pattern.background = None
    if not patterns or not background:
        return
    decoys = decoys if decoys is not None else load_motif_database("jaspar")
    targets = [np.asarray(p.ppm, dtype=np.float64).T for p in background]
    targets += [np.asarray(m, dtype=np.float64) for m in decoys.matrices]
    p_values = tomtom([np.asarray(p.ppm, dtype=np.float64).T for p in patterns], targets, n_jobs=1)[0]
    found = scan_pattern_sites(patterns, sequences, threshold=SCAN_THRESHOLD)
    found_shuffled = scan_pattern_sites(patterns, shuffles, threshold=SCAN_THRESHOLD)
    for row, pattern in enumerate(patterns):
        p = np.clip(np.nan_to_num(np.asarray(p_values[row, : len(background)], dtype=float), nan=1.0), 0.0, 1.0)
        q = false_discovery_control(p)
        best = int(np.argmin(p))
        in_sequences = len({site[0] for site in found[pattern.name]})
        in_shuffles = len({site[0] for site in found_shuffled[pattern.name]})
        if q[best] < q_threshold and in_sequences < min_enrichment * in_shuffles:
            twin = background[best]
            pattern.background = {"name": twin.name, "consensus": twin.consensus, "seqlets": twin.seqlets,
                                  "p": float(p[best]), "q": float(q[best]), "in_sequences": in_sequences,
                                  "in_shuffles": in_shuffles}
