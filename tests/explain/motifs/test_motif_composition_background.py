"""Motif reports that cannot headline noise: every pattern's best database match with its q-value
and its rank among all matrices, patterns that a dinucleotide-shuffled background also yields flagged as
composition and left out of the findings, the planted motif first."""
from __future__ import annotations

import numpy as np
import pytest

from bioattn.explain.motif_background import flag_composition
from bioattn.explain.motif_db import MotifDatabase, tomtom_matches
from bioattn.explain.motif_report import describe_finding, finding_rows
from bioattn.explain.motifs import (
    ModiscoSettings, MotifReport, Pattern, background_patterns, discover_patterns, report_order,
)

LENGTH, TSS = 70, 34


def _ppm(consensus: str, sharp: float = 0.9) -> np.ndarray:
    """``(W, 4)`` probabilities of a consensus (A C G T)."""
    ppm = np.full((len(consensus), 4), (1 - sharp) / 3)
    ppm[np.arange(len(consensus)), ["ACGT".index(c) for c in consensus]] = sharp
    return ppm


def _pattern(name: str, consensus: str, seqlets: int, q: float = 0.4) -> Pattern:
    ppm = _ppm(consensus)
    return Pattern(name=name, consensus=consensus, ppm=ppm, contributions=ppm, hypothetical=ppm,
                   sites=[(k, 30, 30 + len(consensus), "+") for k in range(seqlets)],
                   positions=np.full(seqlets, -4.0),
                   matches=[{"id": "MA0108.3", "name": "TBP", "family": "TBP-related factors", "class": "", "p": q / 10,
                             "q": q, "offset": 0, "strand": "+", "rank": 1, "of": 879}])


def _decoys(n: int = 60, seed: int = 0) -> MotifDatabase:
    rng = np.random.default_rng(seed)
    matrices = [rng.dirichlet(np.full(4, 0.5), size=int(rng.integers(6, 15))).T for _ in range(n)]
    return MotifDatabase(label="decoys", ids=[f"D{k}" for k in range(n)], names=[f"decoy{k}" for k in range(n)],
                         families=[""] * n, matrices=matrices)


def test_every_match_carries_its_rank_among_all_matrices() -> None:
    database = _decoys()
    database.matrices[7] = _ppm("TATAAAAG").T
    [matches] = tomtom_matches([_ppm("TATAAAAG").T], database, top=3)
    assert [m["rank"] for m in matches] == [1, 2, 3]
    assert {m["of"] for m in matches} == {60}
    assert matches[0]["id"] == "D7"


def test_a_pattern_the_background_also_yields_is_composition_not_a_finding() -> None:
    planted, noise = _pattern("pos_1", "TATAAA", 150, q=0.35), _pattern("pos_0", "GCGCGCGCGCG", 200, q=0.001)
    background = [_pattern("pos_0", "GCGCGCGCGCG", 180), _pattern("pos_1", "TATAAA", 90)]
    rng = np.random.default_rng(0)
    plain = ["".join(rng.choice(list("ACGT"), LENGTH)) for _ in range(100)]
    gc_rich = [s[:10] + "GCGCGCGCGCG" + s[21:] for s in plain]
    # the sequences: every one GC-rich, half with TATAAA; their 'shuffles': as GC-rich, a few with TATAAA
    sequences = [s[:40] + "TATAAA" + s[46:] if k % 2 else s for k, s in enumerate(gc_rich)]
    shuffles = [s[:40] + "TATAAA" + s[46:] if k % 10 == 0 else s for k, s in enumerate(gc_rich)]
    flag_composition([planted, noise], background, sequences, shuffles, decoys=_decoys())
    assert noise.composition and noise.background["name"] == "pos_0" and noise.background["q"] < 0.05
    assert noise.background["in_sequences"] == noise.background["in_shuffles"] == 100
    # the background's TATAAA look-alike does not explain a core 5 times as frequent in the sequences
    assert not planted.composition
    report = MotifReport(patterns=report_order([noise, planted]), sequences=400, length=LENGTH, tss_index=TSS,
                         database="JASPAR", q_threshold=0.05, attribution="given", groups={},
                         background="dinucleotide shuffles", background_patterns=background)
    assert [p.name for p in report.patterns] == ["pos_1", "pos_0"]  # findings first
    rows = finding_rows(report)
    assert [row["pattern"] for row in rows] == ["pos_1"]  # the significant noise match is not a finding
    assert report.matched_families() == {}  # and it is not counted as a matching TF family
    line = describe_finding(rows[0], 0.05)
    assert line.startswith("TATAAA (pos_1)") and "TBP MA0108.3, rank 1 of 879, q = 0.35" in line
    assert "not significant at q < 0.05" in line


def _planted_pilot(n: int = 300, seed: int = 0) -> list[str]:
    """Random 70-nt sequences (A/T 56 %); every second one holds TATAAA at ~30."""
    rng = np.random.default_rng(seed)
    sequences = []
    for row in range(n):
        letters = list(rng.choice(list("ACGT"), LENGTH, p=[0.28, 0.22, 0.22, 0.28]))
        if row % 2:
            start = 30 + int(rng.integers(-2, 3))
            letters[start : start + 6] = "TATAAA"
        sequences.append("".join(letters))
    return sequences


def _reader(sequences: list[str]) -> np.ndarray:
    """Hypothetical contributions of a 'model' that reads TATAAA strongly and every GCC weakly (a composition
    feature: dinucleotide shuffles keep GCC about as often as the sequences hold it)."""
    rng = np.random.default_rng(len(sequences))
    values = rng.normal(0, 0.02, (len(sequences), LENGTH, 4)).astype(np.float32)
    for row, sequence in enumerate(sequences):
        for word, weight in (("TATAAA", 1.0), ("GCC", 0.6)):
            start = sequence.find(word)
            while start >= 0:
                for offset, base in enumerate(word):
                    values[row, start + offset] = -weight / 3
                    values[row, start + offset, "ACGT".index(base)] = weight
                start = sequence.find(word, start + 1)
    return values


def _reads(pattern: Pattern, word: str) -> bool:
    """Whether ``pattern``'s consensus holds ``word`` on either strand."""
    consensus = pattern.consensus.upper()
    return word in consensus or word.translate(str.maketrans("ACGT", "TGCA"))[::-1] in consensus


@pytest.mark.slow
def test_planted_motif_is_the_first_finding_and_composition_is_flagged() -> None:
    sequences = _planted_pilot()
    settings = ModiscoSettings(n_leiden_runs=2)
    patterns = discover_patterns(sequences, _reader(sequences), tss_index=TSS, settings=settings)
    shuffles, background = background_patterns(sequences, _reader, settings=settings, tss_index=TSS)
    assert any(_reads(p, "GCC") for p in background), [p.consensus for p in background]
    flag_composition(patterns, background, sequences, shuffles, decoys=_decoys())
    report = MotifReport(patterns=report_order(patterns), sequences=len(sequences), length=LENGTH, tss_index=TSS,
                         database="none", q_threshold=0.05, attribution="given", groups={}, background="shuffles",
                         background_patterns=background)
    rows = finding_rows(report)
    assert rows and _reads(report.findings()[0], "TATAAA"), [(p.consensus, p.background) for p in patterns]
    assert abs(rows[0]["median_position"] - (32.5 - TSS)) <= 2
    composition = [p for p in report.patterns if p.composition]
    assert any(_reads(p, "GCC") for p in composition), [(p.consensus, p.background) for p in patterns]
    assert not any(_reads(p, "GCC") for p in report.findings())  # no pattern the background yields is a finding
