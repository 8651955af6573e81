"""Motif discovery over many sequences: the per-metacluster seqlet cap samples all sequences, not the first ones;
and the TOMTOM call finds TBP for a TATA box on either strand."""
from __future__ import annotations

import numpy as np
import pytest

from bioattn.explain.motifs import ModiscoSettings, discover_patterns
from tests.helpers.planted import planted_contributions

LENGTH, TSS = 60, 34
GC_BOX, CCAAT = "GGGGCGGGGC", "CCAATCAG"


def _plant(n: int, plan, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """:func:`~tests.helpers.planted.planted_contributions` at this file's length."""
    return planted_contributions(n, LENGTH, plan, seed)


def _carrying(patterns, motif: str):
    """The pattern whose consensus contains ``motif`` (either strand)."""
    reverse = motif[::-1].translate(str.maketrans("ACGT", "TGCA"))
    found = [p for p in patterns if motif in p.consensus.upper() or reverse in p.consensus.upper()]
    assert found, f"{motif} not found among {[p.consensus for p in patterns]}"
    return max(found, key=lambda p: p.seqlets)


@pytest.mark.slow
def test_the_seqlet_cap_samples_every_part_of_the_input() -> None:
    # the first half carries only the GC box, the second half only CCAAT; the cap holds fewer seqlets than the
    # first half gives, so a cap on the first seqlets in input order would never see CCAAT
    n = 300
    sequences, values = _plant(n, lambda row: (GC_BOX, 12) if row < n // 2 else (CCAAT, 32), seed=1)
    settings = ModiscoSettings(window=11, flank=3, max_seqlets=120, n_leiden_runs=2, min_metacluster_size=20,
                               final_min_cluster_size=10)
    patterns = discover_patterns(sequences, values, groups={"second_half": np.arange(n) >= n // 2},
                                 tss_index=TSS, settings=settings)
    assert _carrying(patterns, "GGGCGG").carriers["second_half"] < 0.1
    assert _carrying(patterns, "CCAAT").carriers["second_half"] > 0.2



@pytest.mark.slow
def test_a_tata_box_query_is_matched_to_tbp_on_either_strand() -> None:
    from bioattn.explain.motif_db import load_motif_database, tomtom_matches

    def ppm(sequence: str) -> np.ndarray:
        matrix = np.full((4, len(sequence)), 0.01)
        matrix[["ACGT".index(base) for base in sequence], np.arange(len(sequence))] = 0.97
        return matrix

    database = load_motif_database("jaspar")
    forward, reverse = tomtom_matches([ppm("TATAAAAG"), ppm("CTTTTATA")], database)
    assert forward[0]["name"] == "TBP" and forward[0]["id"].startswith("MA0108") and forward[0]["strand"] == "+"
    assert reverse[0]["name"] == "TBP" and reverse[0]["strand"] == "-"
    assert forward[0]["p"] < 1e-3
