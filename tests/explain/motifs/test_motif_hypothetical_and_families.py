"""Motif reports: gradient hypothetical contributions (Integrated Gradients path gradients read for every base,
ensemble mean, strand average), the TF family and class of each match and the families count, and positions of a
TATA box planted near the sequence start."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from bioattn.data.dna import A_ID, N_ID, collate_tokens, encode, reverse_complement
from bioattn.errors import UserInputError
from bioattn.explain.attribution import predicted_log_odds
from bioattn.explain.hypothetical import _path_gradients, gradient_hypothetical
from bioattn.explain.motifs import MotifReport, Pattern, explain_motifs
from bioattn.models.promoter import PromoterClassifier
from bioattn.models.ensemble import Ensemble


@pytest.fixture(scope="module")
def tiny_model() -> PromoterClassifier:
    torch.manual_seed(0)
    return PromoterClassifier(max_len=24, embed_dim=8, num_heads=2, num_layers=1, conv_kernel=3).eval()


def _ids(sequences: list[str]) -> torch.Tensor:
    return collate_tokens([encode(s) for s in sequences])[0]


@pytest.mark.slow
def test_path_gradients_are_complete_integrated_gradients(tiny_model) -> None:
    # Integrated Gradients' completeness: (observed - N embedding) · mean path gradient sums to f(x) - f(all N)
    ids = _ids(["ACGTTGCAACGGTTAC", "TTTTAAAACCCCGGGG"])
    classes = torch.tensor([1, 0])
    gradients = _path_gradients(tiny_model, ids, classes, steps=64)
    table = tiny_model.embedding.weight.detach()
    attribution = ((table[ids] - table[N_ID]) * gradients).sum((1, 2))
    with torch.no_grad():
        change = (predicted_log_odds(tiny_model(ids), classes)
                  - predicted_log_odds(tiny_model(torch.full_like(ids, N_ID)), classes))
    torch.testing.assert_close(attribution, change, atol=2e-3, rtol=1e-2)


@pytest.mark.slow
def test_hypothetical_is_centred_and_differences_are_the_one_hot_gradient(tiny_model) -> None:
    ids = _ids(["ACGTTGCAACGGTTAC"])
    classes = torch.tensor([1])
    hypothetical = gradient_hypothetical(tiny_model, ids, classes, steps=16)
    assert hypothetical.shape == (1, 16, 4)
    torch.testing.assert_close(hypothetical.sum(-1), torch.zeros(1, 16), atol=1e-5, rtol=0)
    gradients = _path_gradients(tiny_model, ids, classes, steps=16)
    bases = tiny_model.embedding.weight.detach()[A_ID : A_ID + 4]
    expected = (bases[1] - bases[0]) @ gradients[0].T  # C minus A at every position
    torch.testing.assert_close(hypothetical[0, :, 1] - hypothetical[0, :, 0], expected, atol=1e-5, rtol=1e-4)


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_ensemble_hypothetical_is_the_members_mean_and_strands_average_by_reverse_complement() -> None:
    torch.manual_seed(1)
    members = [PromoterClassifier(max_len=24, embed_dim=8, num_heads=2, num_layers=1).eval() for _ in range(2)]
    ensemble = Ensemble(members).eval()
    sequence = "ACGTTGCAACGGTTACGA"
    ids, classes = _ids([sequence]), torch.tensor([1])
    each = [gradient_hypothetical(m, ids, classes, steps=8) for m in members]
    torch.testing.assert_close(gradient_hypothetical(ensemble, ids, classes, steps=8), (each[0] + each[1]) / 2)
    # strand-averaged contributions of a sequence are those of its reverse complement, reversed with A<->T, C<->G
    forward = gradient_hypothetical(members[0], ids, classes, rc_average=True, steps=8)
    reverse = gradient_hypothetical(members[0], _ids([reverse_complement(sequence)]), classes, rc_average=True, steps=8)
    torch.testing.assert_close(forward, reverse.flip(1).flip(2), atol=1e-5, rtol=1e-4)


def test_unknown_motif_attribution_is_a_clear_user_error(tiny_model) -> None:
    with pytest.raises(UserInputError, match="motif attribution must be one of integrated_gradients, ism"):
        explain_motifs(tiny_model, ["ACGTACGTACGT"], attribution="saliency", progress=False)


def _pattern(name: str, family: str, q: float) -> Pattern:
    return Pattern(name=name, consensus="ACGT", ppm=np.full((4, 4), 0.25), contributions=np.zeros((4, 4)),
                   hypothetical=np.zeros((4, 4)), sites=[(0, 1, 5, "+")], positions=np.array([-30.0]),
                   matches=[{"id": "MA0", "name": name.upper(), "family": family, "class": "c", "p": q, "q": q,
                             "offset": 0, "strand": "+"}])


def test_families_count_best_matches_below_the_q_threshold_once_per_family() -> None:
    patterns = [_pattern("a", "TBP-related factors", 0.001), _pattern("b", "TBP-related factors", 0.01),
                _pattern("c", "Ets-related", 0.2), _pattern("d", "", 0.01)]
    report = MotifReport(patterns=patterns, sequences=1, length=70, tss_index=34, database="x", q_threshold=0.05,
                         attribution="given", groups={})
    assert report.matched_families() == {"TBP-related factors": ["a", "b"], "D": ["d"]}


@pytest.mark.slow
def test_jaspar_matches_carry_family_and_class_into_motifs_tsv(tmp_path) -> None:
    from bioattn.explain.motif_db import load_motif_database, tomtom_matches
    from bioattn.explain.motif_report import write_motif_report

    ppm = np.full((4, 8), 0.01)
    ppm[["ACGT".index(b) for b in "TATAAAAG"], np.arange(8)] = 0.97
    [matches] = tomtom_matches([ppm], load_motif_database("jaspar"))
    assert matches[0]["name"] == "TBP"
    assert matches[0]["family"] == "TBP-related factors" and matches[0]["class"] == "TATA-binding proteins"
    pattern = _pattern("pos_0", "", 1.0)
    pattern.matches = [dict(matches[0], q=0.001)]
    report = MotifReport(patterns=[pattern], sequences=1, length=70, tss_index=34, database="JASPAR", q_threshold=0.05,
                         attribution="given", groups={})
    write_motif_report(report, tmp_path)
    header, row = (tmp_path / "motifs.tsv").read_text().splitlines()[:2]
    values = dict(zip(header.split("\t"), row.split("\t")))
    assert values["best_match_family"] == "TBP-related factors"
    assert values["best_match_class"] == "TATA-binding proteins"
    assert float(values["median_position"]) == -30.0
    assert "1 TF families" in (tmp_path / "motifs.html").read_text()


@pytest.mark.slow
def test_a_tata_box_two_nt_from_the_start_is_found_at_its_position() -> None:
    # GUE TATA boxes start 2-5 nt from the sequence start; TF-MoDISco must neither lose them at the edge nor
    # misplace them
    from bioattn.explain.motifs import ModiscoSettings, discover_patterns

    length, tss, start, n = 70, 34, 2, 300
    rng = np.random.default_rng(0)
    sequences, values = [], rng.normal(0, 0.02, (n, length, 4)).astype(np.float32)
    for row in range(n):
        letters = list(rng.choice(list("ACGT"), length))
        if row % 2 == 0:
            letters[start : start + 8] = "TATAAAAG"
            for offset, base in enumerate("TATAAAAG"):
                values[row, start + offset] = -1 / 3
                values[row, start + offset, "ACGT".index(base)] = 1.0
        sequences.append("".join(letters))
    planted = np.arange(n) % 2 == 0
    patterns = discover_patterns(sequences, values, groups={"planted": planted, "plain": ~planted}, tss_index=tss,
                                 settings=ModiscoSettings(n_leiden_runs=2))
    tata = [p for p in patterns if "TATAAA" in p.consensus.upper() or "TTTATA" in p.consensus.upper()]
    assert tata, [p.consensus for p in patterns]
    box = max(tata, key=lambda p: p.seqlets)
    assert box.carriers["planted"] > 0.9 and box.carriers["plain"] < 0.05
    assert abs(np.median(box.positions) - (start + 3.5 - tss)) <= 1


def test_predicted_positive_motifs_need_a_predicted_positive(tiny_model) -> None:
    # with use="predicted_positive" only the sequences predicted positive are explained; none predicted says so
    torch.manual_seed(0)
    model = PromoterClassifier(max_len=24, embed_dim=8, num_heads=2, num_layers=1).eval()
    with torch.no_grad():
        model.head[-1].bias.fill_(-50.0)
    with pytest.raises(UserInputError, match="none of the 3 sequences is predicted positive"):
        explain_motifs(model, ["ACGTACGTACGT"] * 3, use="predicted_positive", progress=False)
    with pytest.raises(UserInputError, match="motif sequences must be one of all, predicted_positive"):
        explain_motifs(model, ["ACGTACGTACGT"], use="positives", progress=False)
