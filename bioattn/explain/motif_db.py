"""Known motifs to annotate patterns with, offline (JASPAR via ``pyjaspar`` or a MEME file), and TOMTOM matching."""
from __future__ import annotations

import numpy as np

from bioattn.data.motif_db import DEFAULT_DB, DEFAULT_Q, JASPAR_RELEASE, MotifDatabase, load_motif_database

__all__ = ["DEFAULT_DB", "DEFAULT_Q", "JASPAR_RELEASE", "MotifDatabase", "load_motif_database", "tomtom_matches"]


def tomtom_matches(queries: list[np.ndarray], database: MotifDatabase, *, top: int = 3) -> list[list[dict]]:
    """The ``top`` best TOMTOM matches (with BH q-values) of every query PPM ``(4, W)``, as dicts."""
    from memelite import tomtom
    from scipy.stats import false_discovery_control
    if not queries:
        return []
    targets = [m.astype(np.float64) for m in database.matrices]
    p_values, _, offsets, _, strands = tomtom([q.astype(np.float64) for q in queries], targets, n_jobs=1)
    matches = []
    for row in range(len(queries)):
        p = np.clip(np.nan_to_num(p_values[row], nan=1.0), 0.0, 1.0)
        q = false_discovery_control(p)
        best = np.argsort(p, kind="stable")[:top]
        matches.append([{"id": database.ids[t], "name": database.names[t], "family": database.families[t],
                         "class": database.classes[t] if t < len(database.classes) else "",
                         "p": float(p[t]), "q": float(q[t]), "offset": int(offsets[row, t]),
                         "strand": "-" if int(strands[row, t]) else "+", "rank": rank + 1, "of": len(database)}
                        for rank, t in enumerate(best)])
    return matches
