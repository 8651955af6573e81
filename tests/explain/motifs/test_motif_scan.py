"""Scanning discovered patterns (bioattn.explain.motif_scan): the sequences that carry a pattern, found on both
strands; the spacer of a two-box element such as the σ70 −35 / −10 boxes; and the spacers between discovered
patterns from scans of their cores (motif_scan_spacings.tsv), where a planted σ70-like −35 / −10 pair is reported
with its spacer, read in the sense the sequences carry each box."""
from __future__ import annotations

import numpy as np
import pytest

from bioattn.errors import UserInputError
from bioattn.explain.motif_report import write_motif_report
from bioattn.explain.motif_scan import box_spacers, pattern_sense, scan_pattern_sites, scan_spacings
from bioattn.explain.motifs import MotifReport, ModiscoSettings, Pattern, discover_patterns

LENGTH, TSS, SPACER = 81, 60, 17
MINUS35, MINUS10 = "TTGACA", "TATAAT"
FAST = ModiscoSettings(window=9, flank=3, max_seqlets=400, n_leiden_runs=2, min_metacluster_size=20,
                       final_min_cluster_size=10)


def _pattern(name: str, strands: str) -> Pattern:
    ppm = np.full((6, 4), 0.25)
    return Pattern(name=name, consensus="NNNNNN", ppm=ppm, contributions=ppm, hypothetical=ppm,
                   sites=[(k, 0, 6, strand) for k, strand in enumerate(strands)], positions=np.zeros(len(strands)))


def test_sense_is_the_strand_of_most_seqlets() -> None:
    assert pattern_sense(_pattern("a", "--+")) == "-"
    assert pattern_sense(_pattern("a", "++-")) == "+"
    assert pattern_sense(_pattern("a", "+-")) == "+"  # a tie reads the consensus as reported


def test_spacer_table_from_given_sites_reads_each_pattern_in_its_sense() -> None:
    # pattern a reported as the reverse complement (seqlets on "-"), b on "+"; 6 sequences carry a 17-nt spacer,
    # one an 18-nt one, and one a pair read on the wrong strands, which must not count
    up, down = _pattern("a", "---"), _pattern("b", "+++")
    sites = {"a": [(k, 20, 26, "-", 1e-4) for k in range(7)] + [(7, 20, 26, "+", 1e-4)],
             "b": [(k, 43, 49, "+", 1e-4) for k in range(6)] + [(6, 44, 50, "+", 1e-4), (7, 43, 49, "-", 1e-4)]}
    groups = {"first_four": np.arange(8) < 4, "rest": np.arange(8) >= 4}
    rows = scan_spacings([up, down], ["A" * 81] * 8, groups=groups, sites=sites)
    assert len(rows) == 1  # b is never upstream of a
    row = rows[0]
    assert (row["first"], row["second"], row["first_strand"], row["second_strand"]) == ("a", "b", "-", "+")
    assert row["sequences"] == 7 and row["spacer_mode"] == 17 and row["at_mode"] == 7
    assert row["fraction_first_four"] == 1.0 and row["fraction_rest"] == 0.75
    assert scan_spacings([up, down], ["A" * 81] * 8, sites=sites, min_sequences=8) == []
    with pytest.raises(UserInputError, match="min_sequences"):
        scan_spacings([up, down], ["A" * 81] * 8, sites=sites, min_sequences=0)


def _promoters(n: int, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """GC-rich background; the first ``n`` sequences carry TTGACA, 17 nt, TATAAT ending 7 nt before the TSS, the
    next ``n`` none. Hypothetical contributions: +1 on the planted bases (-1/3 on the others), noise elsewhere."""
    rng = np.random.default_rng(seed)
    values = rng.normal(0, 0.02, (2 * n, LENGTH, 4)).astype(np.float32)
    sequences = []
    start10 = TSS - 7 - 6
    start35 = start10 - SPACER - 6
    for row in range(2 * n):
        letters = list(rng.choice(list("GC"), LENGTH))
        if row < n:
            for box, start in ((MINUS35, start35), (MINUS10, start10)):
                letters[start : start + 6] = box
                for offset, base in enumerate(box):
                    values[row, start + offset] = -1 / 3
                    values[row, start + offset, "ACGT".index(base)] = 1.0
        sequences.append("".join(letters))
    return sequences, values


@pytest.mark.slow  # TF-MoDISco, and memelite compiles FIMO on first use
def test_planted_minus35_minus10_pair_is_reported_with_its_17_nt_spacer(tmp_path) -> None:
    sequences, values = _promoters(120)
    groups = {"promoters": np.arange(240) < 120, "background": np.arange(240) >= 120}
    patterns = discover_patterns(sequences, values, groups=groups, tss_index=TSS, settings=FAST)
    rows = scan_spacings(patterns, sequences, groups=groups)
    best = rows[0]
    assert best["spacer_mode"] == SPACER and best["at_mode"] >= 0.9 * best["sequences"]
    assert best["fraction_promoters"] > 0.9 and best["fraction_background"] == 0
    first = next(p for p in patterns if p.name == best["first"])
    assert abs(np.median(first.positions) - (-35 + 2.5)) < 3  # the upstream pattern is the -35 box
    report = MotifReport(patterns=patterns, sequences=len(sequences), length=LENGTH, tss_index=TSS, database="none",
                         q_threshold=0.05, attribution="planted", groups={k: int(v.sum()) for k, v in groups.items()},
                         scan_spacings=rows)
    write_motif_report(report, tmp_path)
    table = (tmp_path / "motif_scan_spacings.tsv").read_text().splitlines()
    assert table[0].split("\t")[:5] == ["first", "second", "first_strand", "second_strand", "sequences"]
    assert table[1].split("\t")[table[0].split("\t").index("spacer_mode")] == str(SPACER)


# ------------------------------------------------------------- carriers and spacers from scans of given cores
_RC = str.maketrans("ACGT", "TGCA")


def _core_pattern(name: str, core: str) -> Pattern:
    ppm = np.full((len(core), 4), 0.01)
    for j, letter in enumerate(core):
        ppm[j, "ACGT".index(letter)] = 0.97
    return Pattern(name=name, consensus=core, ppm=ppm, contributions=ppm, hypothetical=ppm, sites=[],
                   positions=np.zeros(0))


def _spaced_promoters(spacers: list[int], length: int = 81, tss: int = 60, seed: int = 0) -> list[str]:
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
    sequences = _spaced_promoters([15, 17, 19, 17]) + ["".join(np.random.default_rng(1).choice(list("GC"), 81))]
    # the -35 pattern as TF-MoDISco may report it: the box's reverse complement
    minus35, minus10 = _core_pattern("pos_0", "TTGACA"[::-1].translate(_RC)), _core_pattern("pos_5", "TATAAT")
    sites = scan_pattern_sites([minus35, minus10], sequences, threshold=1e-3, offset=60)
    assert sorted({s[0] for s in sites["pos_0"]}) == [0, 1, 2, 3]  # every promoter, not the background sequence
    assert {s[3] for s in sites["pos_0"]} == {"-"}  # read on the reverse strand of the pattern
    assert {(s[1], s[2]) for s in sites["pos_5"] if s[3] == "+"} == {(-13, -7)}  # TSS-relative core coordinates


@pytest.mark.slow
def test_spacer_counts_boxes_read_in_the_element_sense() -> None:
    sequences = _spaced_promoters([15, 17, 19, 17])
    minus35, minus10 = _core_pattern("pos_0", "TGTCAA"), _core_pattern("pos_5", "TATAAT")
    sites = scan_pattern_sites([minus35, minus10], sequences, threshold=1e-3)
    assert box_spacers(sites["pos_0"], sites["pos_5"], upstream_strand="-") == {0: 15, 1: 17, 2: 19, 3: 17}
    # the wrong strand for the reverse-complement pattern finds no -35 box at all
    assert box_spacers(sites["pos_0"], sites["pos_5"], upstream_strand="+") == {}
    # a gap window excludes pairs outside it
    assert box_spacers(sites["pos_0"], sites["pos_5"], upstream_strand="-", gaps=(16, 18)) == {1: 17, 3: 17}


def test_scan_refuses_mixed_lengths_and_bad_thresholds() -> None:
    with pytest.raises(UserInputError, match="one length"):
        scan_pattern_sites([_core_pattern("a", "TATAAT")], ["ACGTACGT", "ACGT"])
    with pytest.raises(UserInputError, match="threshold"):
        scan_pattern_sites([_core_pattern("a", "TATAAT")], ["ACGTACGT"], threshold=0)
