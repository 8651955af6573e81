"""Patterns that composition alone yields: the motif pipeline run again on a composition-matched background.

Every sequence is shuffled once, keeping its dinucleotide counts (tangermeme's ``dinucleotide_shuffle``,
:func:`~bioattn.explain.marginalize.shuffled_backgrounds`), and the shuffles go through the same pipeline as the
sequences (the model's hypothetical contributions, TF-MoDISco: :func:`~bioattn.explain.motifs.background_patterns`);
:func:`flag_composition` compares the two sets of patterns.
A pattern of the real sequences that a background pattern matches (TOMTOM q < ``q_threshold``) and whose core
is not enriched in the sequences over their shuffles (found in fewer than :data:`MIN_ENRICHMENT` times as many) is
what the model reads in any sequence of that composition: it is flagged ``composition`` and not listed as a
finding. A planted or real element is broken up by the shuffle: the shuffles may still yield a weaker look-alike
(a planted TATAAA's letters recur in some shuffles), but its core is then far more frequent in the sequences.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from bioattn.explain.motif_db import DEFAULT_Q, MotifDatabase

#: A pattern whose core occurs in fewer than this many times as many sequences as shuffles is not enriched over
#: composition. The sequences holding it are counted by a scan of its core (FIMO), not by seqlets: each run's seqlet
#: thresholds follow its own contributions, so a background (weaker) cuts seqlets at weaker sites.
MIN_ENRICHMENT = 1.5
#: How the background is described in reports.
BACKGROUND = "dinucleotide shuffles"


def flag_composition(patterns: Sequence[Any], background: Sequence[Any], sequences: Sequence[str],
                     shuffles: Sequence[str], *, decoys: MotifDatabase | None = None, q_threshold: float = DEFAULT_Q,
                     min_enrichment: float = MIN_ENRICHMENT) -> None:
    """Set ``pattern.background`` on every :class:`~bioattn.explain.motifs.Pattern` of ``patterns`` (found in ``sequences``) that a pattern of
    ``background`` (found in ``shuffles``) matches at TOMTOM q < ``q_threshold`` while its core is found (FIMO,
    :func:`~bioattn.explain.motif_scan.scan_pattern_sites`, p < 1e-3 or, for a core too short to reach it, its exact
    letters) in fewer than ``min_enrichment`` times as many sequences as shuffles (or in none of either): ``{"name", "consensus", "seqlets", "p", "q", "in_sequences", "in_shuffles"}`` of the matching
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
    for row, pattern in enumerate(patterns):
        p = np.clip(np.nan_to_num(np.asarray(p_values[row, : len(background)], dtype=float), nan=1.0), 0.0, 1.0)
        q = false_discovery_control(p)
        best = int(np.argmin(p))
        # a core of W letters cannot score below 4**-W: short cores count their exact matches
        threshold = max(SCAN_THRESHOLD, 1.01 * 0.25 ** len(pattern.ppm))
        in_sequences, in_shuffles = (len({site[0] for site in scan_pattern_sites([pattern], where,
                                                                                  threshold=threshold)[pattern.name]})
                                     for where in (sequences, shuffles))
        enriched = in_sequences > 0 and in_sequences >= min_enrichment * in_shuffles
        if q[best] < q_threshold and not enriched:
            twin = background[best]
            pattern.background = {"name": twin.name, "consensus": twin.consensus, "seqlets": twin.seqlets,
                                  "p": float(p[best]), "q": float(q[best]), "in_sequences": in_sequences,
                                  "in_shuffles": in_shuffles}
