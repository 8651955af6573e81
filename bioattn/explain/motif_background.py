"""Patterns that composition alone yields: the motif pipeline run again on a composition-matched background.

Every sequence is shuffled once, keeping its dinucleotide counts (tangermeme's ``dinucleotide_shuffle``,
:func:`~bioattn.explain.marginalize.shuffled_backgrounds`), and the shuffles go through the same pipeline as the
sequences (the model's hypothetical contributions, TF-MoDISco, :func:`~bioattn.explain.motifs.discover_patterns`).
A pattern of the real sequences that a background pattern matches (TOMTOM q < ``q_threshold``, with at least
:data:`BACKGROUND_SUPPORT` of its seqlets) is what the model reads in any sequence of that composition: it is
flagged ``composition`` and not listed as a finding. A planted or real element is broken up by the shuffle, so its
pattern has no such twin (or a much weaker one).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from bioattn.explain.motif_db import DEFAULT_Q

if TYPE_CHECKING:
    from bioattn.explain.motif_db import MotifDatabase
    from bioattn.explain.motifs import ModiscoSettings, Pattern

#: A background pattern explains a real one only with at least this fraction of its seqlets (as many shuffles as
#: sequences): a planted box whose letters recur by chance in a few shuffles keeps its place as a finding.
BACKGROUND_SUPPORT = 0.5
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


def flag_composition(patterns: Sequence["Pattern"], background: Sequence["Pattern"], *,
                     decoys: "MotifDatabase | None" = None, q_threshold: float = DEFAULT_Q,
                     support: float = BACKGROUND_SUPPORT) -> None:
    """Set ``pattern.background`` (the matching background pattern: ``{"name", "consensus", "seqlets", "p", "q"}``)
    on every pattern of ``patterns`` that a pattern of ``background`` matches at TOMTOM q < ``q_threshold`` with at
    least ``support`` times its seqlets; the others get ``None``.

    TOMTOM's null for a query column is built from every target column, so the background patterns are compared
    among ``decoys`` (the default: JASPAR CORE vertebrates, as shipped), which shape that null only: the q-values
    (Benjamini-Hochberg) are over the background patterns."""
    from memelite import tomtom
    from scipy.stats import false_discovery_control

    from bioattn.explain.motif_db import load_motif_database

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
        for k in np.argsort(p, kind="stable"):
            twin = background[k]
            if q[k] < q_threshold and twin.seqlets >= support * pattern.seqlets:
                pattern.background = {"name": twin.name, "consensus": twin.consensus, "seqlets": twin.seqlets,
                                      "p": float(p[k]), "q": float(q[k])}
                break
