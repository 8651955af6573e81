"""Patterns that composition alone yields: the motif pipeline run again on dinucleotide shuffles of the sequences."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from bioattn.explain.motif_db import DEFAULT_Q, MotifDatabase

MIN_ENRICHMENT = 1.5
BACKGROUND = "dinucleotide shuffles"


def flag_composition(patterns: Sequence[Any], background: Sequence[Any], sequences: Sequence[str],
                     shuffles: Sequence[str], *, decoys: MotifDatabase | None = None, q_threshold: float = DEFAULT_Q,
                     min_enrichment: float = MIN_ENRICHMENT) -> None:
    """Set ``pattern.background`` where a ``background`` pattern matches and the core is not enriched, else ``None``."""
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
