"""Motif reports: TF-MoDISco patterns on attributions, TOMTOM against JASPAR, ISM, and which head reads which motif."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from bioattn.cli import main as cli_main
from bioattn.data.dna import A_ID, C_ID, collate_tokens, encode
from bioattn.errors import UserInputError
from bioattn.explain.head_motifs import cls_attention, head_motif_enrichment
from bioattn.explain.ism import ism_attribution
from bioattn.explain.motif_db import load_motif_database
from bioattn.explain.motifs import ModiscoSettings, discover_patterns
from bioattn.explain.attribution import predicted_log_odds
from bioattn.models.promoter import PromoterClassifier
from bioattn.tasks.promoter.attribution import promoter_attribution
from tests.helpers.planted import planted_contributions

LENGTH, TSS = 60, 40
GC_BOX, CCAAT = "GGGGCGGGGC", "CCAATCAG"
FAST = ModiscoSettings(window=11, flank=3, max_seqlets=400, n_leiden_runs=2, min_metacluster_size=20,
                       final_min_cluster_size=10)


def _planted(n: int, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """Random sequences; the first half carry the GC box at 12..22, the second half CCAAT at 30..38, with
    hypothetical contributions on the planted bases (:func:`~tests.helpers.planted.planted_contributions`)."""
    return planted_contributions(n, LENGTH, lambda row: (GC_BOX, 12) if row < n // 2 else (CCAAT, 30), seed)


@pytest.mark.slow
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


@pytest.mark.slow
def test_unknown_motif_database_is_a_clear_user_error(tmp_path) -> None:
    with pytest.raises(UserInputError, match="no such file"):
        load_motif_database(tmp_path / "absent.meme")
    with pytest.raises(UserInputError, match="has no CORE matrices"):
        load_motif_database("jaspar:CORE:martians")
    bad = tmp_path / "bad.meme"
    bad.write_text("MEME version 4\n\nALPHABET= ACGT\n")
    with pytest.raises(UserInputError, match="bad.meme"):
        load_motif_database(bad)
    assert load_motif_database("none") is None


def test_user_meme_file_is_a_database(tmp_path) -> None:
    meme = tmp_path / "mine.meme"
    rows = "\n".join(" ".join("0.97" if b == c else "0.01" for b in "ACGT") for c in "TATAAAAG")
    meme.write_text("MEME version 4\n\nALPHABET= ACGT\n\nstrands: + -\n\n"
                    f"MOTIF tata1 MyTATA\nletter-probability matrix: alength= 4 w= 8\n{rows}\n")
    database = load_motif_database(meme)
    assert database.ids == ["tata1"] and database.names == ["MyTATA"] and database.matrices[0].shape == (4, 8)
    assert database.matrices[0][3, 0] > 0.9  # T first


@pytest.fixture(scope="module")
def tiny_model() -> PromoterClassifier:
    torch.manual_seed(0)
    return PromoterClassifier(max_len=16, embed_dim=8, num_heads=2, num_layers=1, conv_kernel=3, rc_average=True).eval()


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_ism_equals_every_substitution_scored_by_hand(tiny_model) -> None:
    sequences = ["ACGTTGCAAC", "GGGTTTAACC", "TTTTACGCGA"]
    ids, mask = collate_tokens([encode(s) for s in sequences])
    classes = torch.tensor([1, 0, 1])
    hypothetical = ism_attribution(tiny_model, ids, mask, classes, hypothetical=True)
    with torch.no_grad():
        for row in range(len(sequences)):
            for position in range(len(sequences[row])):
                edited = ids[row].repeat(4, 1)
                edited[:, position] = torch.arange(4) + A_ID
                # the model's own strand handling: both strands averaged
                score = predicted_log_odds(tiny_model.predict_logits(edited, None, rc_average=True), classes[row].repeat(4))
                torch.testing.assert_close(hypothetical[row, position], score - score.mean(), atol=1e-5, rtol=1e-4)
    observed = promoter_attribution(tiny_model, ids, mask, "ism", classes=classes)
    expected = hypothetical.gather(2, (ids - A_ID).clamp(0, 3)[..., None])[..., 0]
    torch.testing.assert_close(observed, expected)


def _two_reader_model(length: int) -> PromoterClassifier:
    """One layer, two heads built so that [CLS] of head 0 attends to A tokens and head 1 to C tokens."""
    model = PromoterClassifier(max_len=length, embed_dim=8, num_heads=2, num_layers=1, conv_kernel=0, rc_average=False)
    attention = model.encoder.layers[0].self_attn
    with torch.no_grad():
        model.embedding.weight.copy_(torch.eye(8))
        model.positional.embedding.weight.zero_()
        attention.q_proj.weight.zero_()
        attention.q_proj.bias.copy_(torch.tensor([1.0, 0, 0, 0, 1.0, 0, 0, 0]))
        attention.k_proj.weight.zero_()
        attention.k_proj.bias.zero_()
        attention.k_proj.weight[0, A_ID] = 10.0  # head 0 (dims 0-3) keys on A
        attention.k_proj.weight[4, C_ID] = 10.0  # head 1 (dims 4-7) keys on C
    return model.eval()


def test_the_head_that_reads_each_planted_motif_is_identified() -> None:
    length, n = 40, 60
    rng = np.random.default_rng(0)
    sequences, sites = [], {"AAAAAA": [], "CCCCCC": []}
    for row in range(n):
        letters = list(rng.choice(list("GT"), length))
        first, second = sorted(rng.choice(np.arange(0, length - 6, 7), size=2, replace=False))
        (a, c) = (first, second) if row % 2 else (second, first)  # both orders, so position alone cannot tell
        letters[a : a + 6], letters[c : c + 6] = "AAAAAA", "CCCCCC"
        sequences.append("".join(letters))
        sites["AAAAAA"].append((row, int(a), int(a) + 6))
        sites["CCCCCC"].append((row, int(c), int(c) + 6))
    ids, mask = collate_tokens([encode(s) for s in sequences])
    attention = cls_attention(_two_reader_model(length), ids, mask)
    assert attention.shape == (1, n, 2, length)
    table = head_motif_enrichment(attention, [length] * n, sites)
    assert table.reader("AAAAAA") == (0, 0) and table.reader("CCCCCC") == (0, 1)
    assert table.ratio[0, 0, 0] > 3 and table.ratio[0, 1, 1] > 3  # each reader concentrates on its motif
    assert table.ratio[0, 1, 0] < 1 and table.ratio[0, 0, 1] < 1  # and not on the other one


@pytest.mark.slow
def test_explain_promoter_motifs_writes_a_self_contained_report(tmp_path, tiny_model, capsys) -> None:
    tiny_model.save_pretrained(tmp_path / "run")
    rng = np.random.default_rng(1)
    fasta = tmp_path / "in.fa"
    fasta.write_text("".join(f">s{i}\n{''.join(rng.choice(list('ACGT'), 16))}\n" for i in range(40)))
    out = tmp_path / "out"
    argv = ["explain", "promoter", "--model", str(tmp_path / "run"), "--input", str(fasta), "--out", str(out), "--motif", "",
            "--plot-sequences", "0", "--no-faithfulness", "--method", "rollout", "--motifs", "--motif-db", "none",
            "--tss-index", "8"]
    assert cli_main(argv) == 0
    printed = capsys.readouterr().out
    assert "no database (--motif-db none)" in printed and "matching none" not in printed, printed
    page = (out / "motifs.html").read_text()
    assert "<img src=\"http" not in page and "<script src" not in page and "<link" not in page
    header = (out / "motifs.tsv").read_text().splitlines()[0].split("\t")
    assert header[:6] == ["pattern", "consensus", "length", "seqlets", "mean_position", "sd_position"]
    assert {"fraction_predicted_positive", "fraction_predicted_negative"} <= set(header)
    assert json.loads((out / "summary.json").read_text())["motifs"]["database"] == "none"


@pytest.mark.slow
def test_explain_promoter_motifs_rejects_bad_input_before_writing(tmp_path, tiny_model, capsys) -> None:
    tiny_model.save_pretrained(tmp_path / "run")
    fasta = tmp_path / "in.fa"
    fasta.write_text(">a\nACGTACGTAC\n>b\nACGTACGTACGT\n")
    base = ["explain", "promoter", "--model", str(tmp_path / "run"), "--input", str(fasta), "--motifs"]
    assert cli_main([*base, "--out", str(tmp_path / "o1")]) == 2
    assert "one length" in capsys.readouterr().err and not (tmp_path / "o1").exists()
    assert cli_main([*base, "--out", str(tmp_path / "o2"), "--motif-db", str(tmp_path / "absent.meme")]) == 2
    assert "absent.meme" in capsys.readouterr().err and not (tmp_path / "o2").exists()


def test_information_logo_of_a_sparse_matrix_prints_nothing(tmp_path, capsys) -> None:
    """Zero probabilities (a clean consensus) are clipped for the logarithm; the rows must still sum to 1, or
    logomaker prints its renormalisation notice into the command's standard output."""
    from bioattn.explain.motif_report import _logo

    _logo(np.eye(4)[[3, 0, 3, 0, 0, 0]], tmp_path / "logo.png", title="TATAAA", ylabel="bits", information=True)
    assert (tmp_path / "logo.png").stat().st_size > 0
    assert capsys.readouterr().out == ""
