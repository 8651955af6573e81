"""Counting the sequences that carry a discovered pattern by scanning (both strands), and the spacer of a two-box
element such as the σ70 −35 / −10 boxes."""
from __future__ import annotations

import numpy as np
import pytest

from bioattn.errors import UserInputError
from bioattn.explain.motif_scan import box_spacers, scan_pattern_sites
from bioattn.explain.motifs import Pattern

_RC = str.maketrans("ACGT", "TGCA")


def pattern(name: str, core: str) -> Pattern:
    ppm = np.full((len(core), 4), 0.01)
    for j, letter in enumerate(core):
        ppm[j, "ACGT".index(letter)] = 0.97
    return Pattern(name=name, consensus=core, ppm=ppm, contributions=ppm, hypothetical=ppm, sites=[],
                   positions=np.zeros(0))


def promoters(spacers: list[int], length: int = 81, tss: int = 60, seed: int = 0) -> list[str]:
    """Random GC-rich background (no chance box) with TTGACA, ``spacer`` nt, TATAAT ending 7 nt before the TSS."""
    rng = np.random.default_rng(seed)
    out = []
    for spacer in spacers:
        letters = list(rng.choice(list("GC"), length))
        end10 = tss - 7
        start10 = end10 - 6
        start35 = start10 - spacer - 6
        letters[start10:end10] = "TATAAT"
        letters[start35:start35 + 6] = "TTGACA"
        out.append("".join(letters))
    return out


@pytest.mark.slow  # memelite compiles FIMO on first use (about 20 s)
def test_scan_finds_every_carrier_on_the_right_strand_relative_to_the_tss() -> None:
    sequences = promoters([15, 17, 19, 17]) + ["".join(np.random.default_rng(1).choice(list("GC"), 81))]
    # the -35 pattern as TF-MoDISco may report it: the box's reverse complement
    minus35, minus10 = pattern("pos_0", "TTGACA"[::-1].translate(_RC)), pattern("pos_5", "TATAAT")
    sites = scan_pattern_sites([minus35, minus10], sequences, threshold=1e-3, offset=60)
    assert sorted({s[0] for s in sites["pos_0"]}) == [0, 1, 2, 3]  # every promoter, not the background sequence
    assert {s[3] for s in sites["pos_0"]} == {"-"}  # read on the reverse strand of the pattern
    assert {(s[1], s[2]) for s in sites["pos_5"] if s[3] == "+"} == {(-13, -7)}  # TSS-relative core coordinates


@pytest.mark.slow
def test_spacer_counts_boxes_read_in_the_element_sense() -> None:
    sequences = promoters([15, 17, 19, 17])
    minus35, minus10 = pattern("pos_0", "TGTCAA"), pattern("pos_5", "TATAAT")
    sites = scan_pattern_sites([minus35, minus10], sequences, threshold=1e-3)
    assert box_spacers(sites["pos_0"], sites["pos_5"], upstream_strand="-") == {0: 15, 1: 17, 2: 19, 3: 17}
    # the wrong strand for the reverse-complement pattern finds no -35 box at all
    assert box_spacers(sites["pos_0"], sites["pos_5"], upstream_strand="+") == {}
    # a gap window excludes pairs outside it
    assert box_spacers(sites["pos_0"], sites["pos_5"], upstream_strand="-", gaps=(16, 18)) == {1: 17, 3: 17}


def test_scan_refuses_mixed_lengths_and_bad_thresholds() -> None:
    with pytest.raises(UserInputError, match="one length"):
        scan_pattern_sites([pattern("a", "TATAAT")], ["ACGTACGT", "ACGT"])
    with pytest.raises(UserInputError, match="threshold"):
        scan_pattern_sites([pattern("a", "TATAAT")], ["ACGTACGT"], threshold=0)
