"""Motif reports: TF-MoDISco patterns on attributions, TOMTOM against JASPAR, ISM, and which head reads which motif."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from bioattn.errors import UserInputError
from bioattn.explain.motif_db import load_motif_database, tomtom_matches
from bioattn.explain.motifs import ModiscoSettings, discover_patterns

LENGTH, TSS = 60, 40
GC_BOX, CCAAT = "GGGGCGGGGC", "CCAATCAG"
FAST = ModiscoSettings(window=11, flank=3, max_seqlets=400, n_leiden_runs=2, min_metacluster_size=20,
                       final_min_cluster_size=10)


def _planted(n: int, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """Random sequences; the first half carry the GC box at 12..22, the second half CCAAT at 30..38. Hypothetical
    contributions: +1 on the planted bases (-1/3 on the others), small noise elsewhere."""
    rng = np.random.default_rng(seed)
    sequences, values = [], rng.normal(0, 0.02, (n, LENGTH, 4)).astype(np.float32)
    for row in range(n):
        letters = list(rng.choice(list("ACGT"), LENGTH))
        motif, start = (GC_BOX, 12) if row < n // 2 else (CCAAT, 30)
        letters[start : start + len(motif)] = motif
        for offset, base in enumerate(motif):
            values[row, start + offset] = -1 / 3
            values[row, start + offset, "ACGT".index(base)] = 1.0
        sequences.append("".join(letters))
    return sequences, values


def test_planted_motifs_are_found_placed_and_matched_in_jaspar() -> None:
    sequences, values = _planted(200)
    groups = {"first_half": np.arange(200) < 100, "second_half": np.arange(200) >= 100}
    patterns = discover_patterns(sequences, values, groups=groups, tss_index=TSS, database=load_motif_database("jaspar"),
                                 settings=FAST)
    by_family = {}
    for pattern in patterns:
        best = pattern.best_match(0.05)
        if best:
            by_family[best["family"]] = pattern
    gc = next(p for family, p in by_family.items() if "Kruppel" in family)
    nfy = next(p for family, p in by_family.items() if "CCAAT" in family)
    assert abs(gc.positions.mean() - (12 + 4.5 - TSS)) < 2 and abs(nfy.positions.mean() - (30 + 3.5 - TSS)) < 2
    assert gc.carriers["first_half"] > 0.8 and gc.carriers["second_half"] < 0.1
    assert nfy.carriers["second_half"] > 0.8 and nfy.carriers["first_half"] < 0.1
