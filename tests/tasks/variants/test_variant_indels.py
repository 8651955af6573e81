"""Deletions, insertions and multi-base substitutions are scored: the alternative window keeps the model's length
and the reference window's bases up to the variant, the flank after REF read further for a deletion and cut short
for an insertion (the left flank on a contig scored in reverse complement), checked against windows cut by hand
from a tiny reference, in the middle and at both ends of a contig, on a short contig and on the minus strand; the
command writes numeric deltas for them; symbolic alleles, breakends and alleles past 20 nt are refused by name."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyfaidx
import pytest

from bioattn.cli import main
from bioattn.errors import UserInputError
from bioattn.tasks.variants.predict import predict_variants, score_variants
from bioattn.tasks.variants.records import Variant
from bioattn.tasks.variants.score import variant_windows
from tests.helpers.tiny_activity import write_activity_run
from tests.tasks.variants.test_variant_scoring import StandIn, rc

RNG = np.random.default_rng(69)
C1 = "".join(RNG.choice(list("ACGT"), 120))
C2 = "".join(RNG.choice(list("ACGT"), 12))  # shorter than StandIn's 20-nt window
HEAD = ("##fileformat=VCFv4.2\n##contig=<ID=c1,length=120>\n##contig=<ID=c2,length=12>\n"
        "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n")
W = StandIn.input_length


def _other(base: str) -> str:
    return "A" if base != "A" else "C"


def deletion(pos: int, size: int, contig: str = C1) -> tuple[str, str]:
    """REF and ALT of a ``size``-nt deletion after the padding base at 1-based ``pos``."""
    return contig[pos - 1 : pos + size], contig[pos - 1]


def insertion(pos: int, inserted: str, contig: str = C1) -> tuple[str, str]:
    return contig[pos - 1], contig[pos - 1] + inserted


@pytest.fixture
def fasta(tmp_path: Path):
    (tmp_path / "ref.fa").write_text(f">c1\n{C1}\n>c2\n{C2}\n")
    with pyfaidx.Fasta(str(tmp_path / "ref.fa"), as_raw=True) as handle:
        yield handle


def windows(fasta, chrom: str, pos: int, alleles: tuple[str, str], offset: int, reverse: bool = False) -> tuple[str, str]:
    refs, alts, _, where = variant_windows(fasta, [Variant(chrom, pos, *alleles, 0, 0, "x")], [offset], W,
                                           (lambda name: True) if reverse else None)
    return refs[0][0].tobytes().decode(), alts[0][0].tobytes().decode()


# --------------------------------------------------------------------------------------- windows cut by hand
def test_a_deletion_reads_the_right_flank_further(fasta) -> None:
    ref, alt = windows(fasta, "c1", 60, deletion(60, 3), 10)  # POS 60 (C1[59]) at offset 10: the window C1[49:69]
    assert ref == C1[49:69]
    assert alt == C1[49:60] + C1[63:72]  # the same start, the 3 deleted bases gone, 3 more of the right flank


def test_an_insertion_cuts_the_right_flank_short(fasta) -> None:
    ref, alt = windows(fasta, "c1", 60, insertion(60, "TG"), 10)
    assert ref == C1[49:69]
    assert alt == C1[49:60] + "TG" + C1[60:67]


def test_a_multi_base_substitution_changes_its_bases_only(fasta) -> None:
    mnv = "".join(_other(b) for b in C1[59:62])
    ref, alt = windows(fasta, "c1", 60, (C1[59:62], mnv), 10)
    assert ref == C1[49:69] and alt == C1[49:59] + mnv + C1[62:69]


def test_at_the_left_edge_the_windows_start_at_the_contig(fasta) -> None:
    ref, alt = windows(fasta, "c1", 2, deletion(2, 3), 10)
    assert ref == C1[:20] and alt == C1[:2] + C1[5:23]
    ref, alt = windows(fasta, "c1", 2, insertion(2, "AC"), 10)
    assert ref == C1[:20] and alt == C1[:2] + "AC" + C1[2:18]


def test_at_the_right_edge_a_deletion_reads_back_into_the_left_flank(fasta) -> None:
    ref, alt = windows(fasta, "c1", 115, deletion(115, 3), 10)  # the window is shifted to C1[100:120]
    assert ref == C1[100:120]
    assert alt == C1[97:115] + C1[118:120]  # no bases past the end: the window moves left by the 3 deleted
    ref, alt = windows(fasta, "c1", 118, insertion(118, "GG"), 10)
    assert ref == C1[100:120] and alt == C1[100:118] + "GG"


def test_a_deletion_on_a_contig_shorter_than_the_window_is_filled_with_n(fasta) -> None:
    ref, alt = windows(fasta, "c2", 5, deletion(5, 3, C2), 10)
    assert ref == C2 and alt == C2[:5] + C2[8:] + "NNN"


def test_on_the_minus_strand_the_left_flank_moves(fasta) -> None:
    """Scored in reverse complement (gene orientation): the window's end, its 5' side as scored, is kept."""
    ref, alt = windows(fasta, "c1", 60, deletion(60, 3), 10, reverse=True)
    assert ref == rc(C1[49:69])
    assert alt == rc(C1[46:60] + C1[63:69])
    assert alt[:6] == ref[:6]  # the bases before the variant, as read, are the reference window's
    ref, alt = windows(fasta, "c1", 60, insertion(60, "TG"), 10, reverse=True)
    assert ref == rc(C1[49:69]) and alt == rc(C1[51:60] + "TG" + C1[60:69])


# --------------------------------------------------------------------------------------- scores
def _vcf(tmp_path: Path, *lines: str, name: str = "calls.vcf") -> Path:
    path = tmp_path / name
    path.write_text(HEAD + "".join(line + "\n" for line in lines))
    return path


def _record(pos: int, alleles: tuple[str, str], name: str = ".") -> str:
    return f"c1\t{pos}\t{name}\t{alleles[0]}\t{alleles[1]}\t.\t.\t."


def test_both_strands_average_the_indel_windows(tmp_path) -> None:
    (tmp_path / "ref.fa").write_text(f">c1\n{C1}\n>c2\n{C2}\n")
    vcf = _vcf(tmp_path, _record(60, deletion(60, 3), "del3"), _record(60, insertion(60, "TG"), "ins2"))
    table = score_variants(StandIn(), tmp_path / "ref.fa", vcf, offsets=[10], strands="both")
    assert table["kind"].tolist() == ["deletion", "insertion"]
    model = StandIn()
    reference = C1[49:69]
    for row, alt in zip(table.itertuples(), (C1[49:60] + C1[63:72], C1[49:60] + "TG" + C1[60:67])):
        values = model.predict([reference, rc(reference), alt, rc(alt)])
        assert row.ref_score_gata == pytest.approx((values[0, 0] + values[1, 0]) / 2)
        assert row.alt_score_gata == pytest.approx((values[2, 0] + values[3, 0]) / 2)
        assert row.delta_gc_left == pytest.approx((values[2, 1] + values[3, 1] - values[0, 1] - values[1, 1]) / 2)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny untrained activity model (40 nt) averaging both strands, written as 'bioattn train activity' does."""
    return write_activity_run(tmp_path_factory.mktemp("indel_run") / "run", strand="both")


def test_the_token_path_scores_indels_as_the_string_path(tmp_path, tiny_run, monkeypatch) -> None:
    from bioattn.tasks.variants import windows as token_path

    (tmp_path / "ref.fa").write_text(f">c1 gene_strand=-\n{C1}\n>c2\n{C2}\n")
    vcf = _vcf(tmp_path, _record(60, deletion(60, 3)), _record(60, insertion(60, "TG")),
               _record(115, deletion(115, 3)), _record(3, insertion(3, "GA")),
               _record(30, (C1[29:31], _other(C1[29]) + _other(C1[30]))),
               f"c2\t5\t.\t{C2[4:8]}\t{C2[4]}\t.\t.\t.")
    tokens = [score_variants(tiny_run, tmp_path / "ref.fa", vcf, gene_orientation=g) for g in (False, True)]
    monkeypatch.setattr(token_path, "token_model", lambda model, embed: None)  # predict() on window strings
    strings = [score_variants(tiny_run, tmp_path / "ref.fa", vcf, gene_orientation=g) for g in (False, True)]
    for token, string in zip(tokens, strings):
        pd.testing.assert_frame_equal(token, string, check_exact=False, rtol=1e-5, atol=1e-6)
    assert np.isfinite(tokens[0]["delta"]).all() and (tokens[0]["delta"] != 0).all()
    assert not np.allclose(tokens[0]["delta"], tokens[1]["delta"])  # c1 read in gene orientation


def test_the_command_writes_numeric_deltas_for_a_deletion_and_an_insertion(tmp_path, tiny_run, capsys) -> None:
    (tmp_path / "ref.fa").write_text(f">c1\n{C1}\n>c2\n{C2}\n")
    snv = f"c1\t40\trs40\t{C1[39]}\t{_other(C1[39])}\t.\t.\t."
    vcf = _vcf(tmp_path, snv, _record(60, deletion(60, 3), "del3"), _record(80, insertion(80, "TG"), "ins2"))
    out = tmp_path / "effects.tsv"
    command = ["predict", "variants", "--model", str(tiny_run), "--reference", str(tmp_path / "ref.fa"),
               "--input", str(vcf), "--output", str(out), "--device", "cpu"]
    assert main(command) == 0
    table = pd.read_csv(out, sep="\t")
    assert list(table.columns) == ["chrom", "pos", "id", "ref", "alt", "kind", "ref_score", "alt_score", "delta"]
    assert table[["id", "kind"]].values.tolist() == [["rs40", "snv"], ["del3", "deletion"], ["ins2", "insertion"]]
    assert np.isfinite(table[["ref_score", "alt_score", "delta"]].to_numpy()).all()
    assert (table["delta"].iloc[1:] != 0).all()
    assert "3' of it in the orientation scored" in capsys.readouterr().err
    # a REF that differs from the reference (here a deletion's) is still one error line, exit 2, nothing written
    wrong = C1[59] + "".join(_other(b) for b in C1[60:63])
    bad = _vcf(tmp_path, snv, _record(60, (wrong, C1[59]), "del3"), name="bad.vcf")
    out.unlink()
    assert main(command[:7] + [str(bad)] + command[8:]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: bad.vcf:6 (c1:60): REF ") and "does not match" in err[0]
    assert not out.exists() and not (tmp_path / "effects.skipped.tsv").exists()


def test_skip_indels_still_skips_them(tmp_path) -> None:
    (tmp_path / "ref.fa").write_text(f">c1\n{C1}\n>c2\n{C2}\n")
    mnv = (C1[29:31], _other(C1[29]) + _other(C1[30]))
    vcf = _vcf(tmp_path, _record(60, deletion(60, 3), "del3"), _record(30, mnv, "mnv"),
               f"c1\t70\t.\t{C1[69]}\t<DEL>\t.\t.\t.")
    out = tmp_path / "scores.tsv"
    result = predict_variants(StandIn(), tmp_path / "ref.fa", vcf, out, skip_indels=True)
    assert result.variants == 1 and result.skipped["indel"] == 1 and result.skipped["symbolic"] == 1
    assert pd.read_csv(out, sep="\t")["kind"].tolist() == ["mnv"]
    listed = pd.read_csv(tmp_path / "scores.skipped.tsv", sep="\t")
    assert listed[["id", "reason"]].values.tolist() == [["del3", "indel"], [f"c1:70:{C1[69]}:<DEL>", "symbolic"]]


# --------------------------------------------------------------------------------------- refused by name
@pytest.mark.parametrize("alt, reason, words", [
    (C1[59] + "ACGTACGTACGTACGTACGTA", "too_long", "is a 21-nt insertion; deletions, insertions and substitutions of up to 20 nt"),
    ("<DEL>", "symbolic", "ALT <DEL> is a symbolic allele"),
    ("*", "symbolic", "ALT * stands for a deletion overlapping this position"),
    (".", "symbolic", "ALT . names no alternative allele"),
    (f"{C1[59]}]c1:100]", "symbolic", "is a breakend"),
])
def test_symbolic_and_long_alleles_are_refused_by_name(tmp_path, tiny_run, capsys, alt, reason, words) -> None:
    (tmp_path / "ref.fa").write_text(f">c1\n{C1}\n>c2\n{C2}\n")
    snv = f"c1\t40\t.\t{C1[39]}\t{_other(C1[39])}\t.\t.\t."
    vcf = _vcf(tmp_path, snv, f"c1\t60\tv60\t{C1[59]}\t{alt}\t.\t.\t.")
    out = tmp_path / "scores.tsv"
    with pytest.raises(UserInputError, match=r"calls.vcf:6 \(c1:60\): .*--skip-invalid") as caught:
        score_variants(StandIn(), tmp_path / "ref.fa", vcf)
    assert words in str(caught.value)
    assert main(["predict", "variants", "--model", str(tiny_run), "--reference", str(tmp_path / "ref.fa"),
                 "--input", str(vcf), "--output", str(out), "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: calls.vcf:6 (c1:60): ") and not out.exists()
    result = predict_variants(StandIn(), tmp_path / "ref.fa", vcf, out, skip_invalid=True)
    assert result.variants == 1 and result.skipped[reason] == 1
    listed = pd.read_csv(tmp_path / "scores.skipped.tsv", sep="\t", keep_default_na=False)
    assert listed[["id", "reason"]].values.tolist() == [["v60", reason]] and words in listed["detail"].iloc[0]


def test_a_twenty_nt_insertion_and_deletion_are_scored(tmp_path) -> None:
    (tmp_path / "ref.fa").write_text(f">c1\n{C1}\n>c2\n{C2}\n")
    vcf = _vcf(tmp_path, _record(60, insertion(60, "ACGTACGTACGTACGTACGT")), _record(30, deletion(30, 20)))
    table = score_variants(StandIn(), tmp_path / "ref.fa", vcf)
    assert table["kind"].tolist() == ["insertion", "deletion"] and np.isfinite(table["delta_gata"]).all()


def test_a_head_scores_an_indel_beside_its_ism_set(tmp_path, tiny_run) -> None:
    """The variant-effect head's features of a deletion: its own windows, the in-silico mutagenesis of its POS."""
    from bioattn.models import load_pretrained
    from bioattn.tasks.variants.head import model_features

    (tmp_path / "ref.fa").write_text(f">c1\n{C1}\n>c2\n{C2}\n")
    snv = Variant("c1", 40, C1[39], _other(C1[39]), 0, 0, "x")
    gone = Variant("c1", 60, *deletion(60, 3), 1, 0, "y")
    with pyfaidx.Fasta(str(tmp_path / "ref.fa"), as_raw=True) as fasta:
        names, features, mine, _ = model_features(load_pretrained(tiny_run), fasta, [snv, gone], ism_radius=2,
                                                  embed=False)
        alone = score_variants(tiny_run, fasta, [("c1", 60, gone.ref, gone.alt)])
    assert np.isfinite(features).all()
    assert features[1, names.index("delta")] == pytest.approx(alone["delta"].iloc[0], rel=1e-5, abs=1e-7)
