"""Vectorised variant windows and token-level scoring (bioattn.tasks.variants.windows): the shipped activity and
promoter models give the numbers of the string path (the former implementation, kept here as the reference), on
a tiny reference with a short contig, a gene-oriented contig, soft-masked letters and a window that starts with the
activity model's MPRA flank; ``bioattn predict variants`` writes the same TSV."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyfaidx
import pytest

from bioattn.cli import main
from bioattn.models import load_pretrained
from bioattn.tasks.variants.records import Variant
from bioattn.tasks.variants.score import (AlleleScores, allele_scores, as_dna_model, default_offsets, resolve_strands,
                                          score_table, window_starts)
from bioattn.tasks.variants.windows import build_windows

RNG = np.random.default_rng(3)
COMPLEMENT = np.arange(256, dtype=np.uint8)
for _a, _b in zip(b"ACGTN", b"TGCAN"):
    COMPLEMENT[_a] = _b


def string_path(model, reference, variants, offsets=None, strands="auto", reverse=None, embed=False) -> AlleleScores:
    """The former implementation: a window loop per variant, strings, ``predict``/``embed`` on the strings."""
    model = as_dna_model(model)
    window = int(model.input_length)
    offsets = default_offsets(window) if offsets is None else list(offsets)
    both = resolve_strands(model, strands)
    n, p, s = len(variants), len(offsets), 2 if both else 1
    ref = alt = ref_e = alt_e = None
    weights, where = np.zeros((n, p)), np.zeros((n, p), dtype=np.int64)
    for i, v in enumerate(variants):
        length = len(reference[v.chrom])
        width = min(window, length)
        starts = window_starts(np.array([v.pos - 1]), offsets, length, width)[0]
        seq = np.frombuffer(str(reference[v.chrom][:]).upper().encode(), dtype=np.uint8)
        r = seq[starts[:, None] + np.arange(width)]
        a = r.copy()
        a[np.arange(p), v.pos - 1 - starts] = ord(v.alt)
        weights[i, np.unique(starts, return_index=True)[1]] = 1
        where[i] = v.pos - 1 - starts
        if reverse is not None and reverse(v.chrom):
            r, a = COMPLEMENT[r[:, ::-1]], COMPLEMENT[a[:, ::-1]]
        for k, rows in enumerate((r, a)):
            strands_ = [rows] + ([COMPLEMENT[rows[:, ::-1]]] if both else [])
            texts = [row.tobytes().decode() for st in strands_ for row in st]
            values = np.asarray(model.predict(texts), dtype=np.float64).reshape(s, p, -1).transpose(1, 0, 2)
            if ref is None:
                ref, alt = np.zeros((n, p, s, values.shape[-1])), np.zeros((n, p, s, values.shape[-1]))
            (ref if k == 0 else alt)[i] = values
            if embed:
                e = np.asarray(model.embed(texts), dtype=np.float64).reshape(s, p, -1).transpose(1, 0, 2)
                if ref_e is None:
                    ref_e, alt_e = np.zeros((n, p, s, e.shape[-1])), np.zeros((n, p, s, e.shape[-1]))
                (ref_e if k == 0 else alt_e)[i] = e
    return AlleleScores(ref, alt, weights, where, ref_e, alt_e)


@pytest.fixture(scope="module")
def activity():
    return load_pretrained("lentimpra-wtc11")


@pytest.fixture(scope="module")
def promoter():
    return load_pretrained("gue-prom-core-all")


@pytest.fixture
def genome(tmp_path: Path, activity) -> tuple[Path, list[Variant]]:
    letters = np.array(list("ACGT"))
    c1 = list("".join(RNG.choice(letters, 900)))
    flank = activity.flanks[0]
    c1[300 : 300 + len(flank)] = flank  # a window of the activity model starts with its 5' flank
    c1[500:520] = [c.lower() for c in c1[500:520]]  # soft-masked
    c1 = "".join(c1)
    c2 = "".join(RNG.choice(letters, 50))  # shorter than both models' windows
    c3 = "".join(RNG.choice(letters, 400))  # gene orientation: minus strand
    path = tmp_path / "ref.fa"
    path.write_text(f">c1\n{c1}\n>c2\n{c2}\n>c3 gene_strand=-\n{c3}\n")
    seqs = {"c1": c1.upper(), "c2": c2, "c3": c3}
    positions = [("c1", int(x)) for x in RNG.integers(1, 901, 25)] + [("c1", 401), ("c1", 1), ("c1", 900)]
    positions += [("c2", int(x)) for x in RNG.integers(1, 51, 5)] + [("c3", int(x)) for x in RNG.integers(1, 401, 8)]
    variants = []
    for record, (chrom, pos) in enumerate(positions):
        base = seqs[chrom][pos - 1]
        for allele, alt in enumerate(b for b in "ACGT" if b != base):
            variants.append(Variant(chrom, pos, base, alt, record, allele, f"x:{record}"))
    return path, variants


def _same(new: AlleleScores, old: AlleleScores, embed: bool = False) -> None:
    np.testing.assert_array_equal(new.weights, old.weights)
    np.testing.assert_array_equal(new.offsets, old.offsets)
    np.testing.assert_allclose(new.ref, old.ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(new.alt, old.alt, rtol=1e-5, atol=1e-6)
    assert np.abs(new.alt - new.ref).max() > 0  # the alternative base was set
    if embed:
        np.testing.assert_allclose(new.ref_embed, old.ref_embed, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(new.alt_embed, old.alt_embed, rtol=1e-4, atol=1e-5)


def few(variants: list[Variant]) -> list[Variant]:
    """One alternative allele per position (the three letters in turn), and 8 of the 25 random positions on c1: every
    edge case of the fixture (c1's ends and flank window, the short c2, the minus-strand c3) at a third of the cost
    of the activity model's string path."""
    return [v for v in variants if v.allele == v.record % 3 and not 8 <= v.record < 25]


@pytest.mark.slow
@pytest.mark.parametrize("strands", ["auto", "both"])
def test_activity_model_token_path_equals_string_path(genome, activity, strands) -> None:
    path, variants = genome
    variants = few(variants)
    fasta = pyfaidx.Fasta(str(path), as_raw=True)
    reverse = {"c3"}.__contains__
    new = allele_scores(activity, fasta, variants, strands=strands, reverse=reverse, embed=True, progress=False)
    _same(new, string_path(activity, fasta, variants, strands=strands, reverse=reverse, embed=True), embed=True)


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_activity_model_strand_averaging_run_at_token_level(genome, activity) -> None:
    path, variants = genome
    fasta = pyfaidx.Fasta(str(path), as_raw=True)
    activity.strand = "both"  # a run trained with strand averaging: its predict averages both strands
    try:
        new = allele_scores(activity, fasta, few(variants)[:12], progress=False)
        _same(new, string_path(activity, fasta, few(variants)[:12]))
    finally:
        activity.strand = "forward"


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_promoter_model_token_path_equals_string_path(genome, promoter) -> None:
    path, variants = genome
    fasta = pyfaidx.Fasta(str(path), as_raw=True)
    reverse = {"c3"}.__contains__
    for strands, offsets in (("both", None), ("forward", [0, 30, 69])):
        new = allele_scores(promoter, fasta, variants, strands=strands, offsets=offsets, reverse=reverse, progress=False)
        _same(new, string_path(promoter, fasta, variants, strands=strands, offsets=offsets, reverse=reverse))


def test_ref_and_alt_windows_share_one_forward_pass(genome, promoter) -> None:
    path, variants = genome
    fasta = pyfaidx.Fasta(str(path), as_raw=True)
    c1 = [v for v in variants if v.chrom == "c1"][:40]
    shapes = []
    hook = promoter.register_forward_hook(lambda module, args, output: shapes.append(tuple(args[0].shape)))
    try:
        allele_scores(promoter, fasta, c1, strands="forward", progress=False)
    finally:
        hook.remove()
    (group,) = build_windows(fasta, c1, default_offsets(70), 70)
    distinct_refs = len({row.tobytes() for row in group.ref.reshape(-1, 70)})
    assert distinct_refs < 40 * len(default_offsets(70))  # alleles of one position share their reference windows
    # 40 variants in one pass: every alternative window and each distinct reference window once
    assert shapes == [(40 * len(default_offsets(70)) + distinct_refs, 70)]


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_cli_writes_the_string_paths_table(genome, promoter, tmp_path) -> None:
    path, variants = genome
    rows = [v for v in variants if v.allele == 0]
    vcf = tmp_path / "calls.vcf"
    vcf.write_text("##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
                   + "".join(f"{v.chrom}\t{v.pos}\t.\t{v.ref}\t{v.alt}\t.\t.\t.\n" for v in rows))
    out = tmp_path / "scores.tsv"
    assert main(["predict", "variants", "--model", "gue-prom-core-all", "--reference", str(path), "--input",
                 str(vcf), "--output", str(out), "--strands", "both"]) == 0
    written = pd.read_csv(out, sep="\t", comment="#")
    fasta = pyfaidx.Fasta(str(path), as_raw=True)
    seen: set = set()
    rows = [v for v in rows if not ((v.chrom, v.pos, v.alt) in seen or seen.add((v.chrom, v.pos, v.alt)))]  # once
    before = score_table(rows, string_path(promoter, fasta, rows, strands="both"), ["p_promoter"])
    pd.testing.assert_frame_equal(written, before, check_exact=False, rtol=1e-5, atol=1e-6, check_dtype=False)


def test_non_dna_letter_falls_back_to_the_string_paths_error(tmp_path, promoter) -> None:
    from bioattn.errors import UserInputError

    path = tmp_path / "odd.fa"
    path.write_text(">c1\n" + "ACGT" * 20 + "X" + "ACGT" * 20 + "\n")
    fasta = pyfaidx.Fasta(str(path), as_raw=True)
    with pytest.raises(UserInputError, match="X"):
        allele_scores(promoter, fasta, [Variant("c1", 70, "G", "A", 0, 0, "x")], progress=False)


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_passes_that_reuse_every_reference_window_score_the_same(genome, promoter, monkeypatch) -> None:
    """With passes of one variant, the second and third alleles of a position bring no new reference window (a
    pass with an empty reference part): the scores equal those of the default passes."""
    from bioattn.tasks.variants import windows

    path, variants = genome
    fasta = pyfaidx.Fasta(str(path), as_raw=True)
    c1 = [v for v in variants if v.chrom == "c1"][:30]  # ten positions, three alleles each
    default = allele_scores(promoter, fasta, c1, strands="forward", progress=False)
    monkeypatch.setitem(windows.ROWS, "cpu", 2)  # a budget of 4 rows: one variant (3 alternative rows) per pass
    shapes = []
    hook = promoter.register_forward_hook(lambda module, args, output: shapes.append(args[0].shape[0]))
    try:
        single = allele_scores(promoter, fasta, c1, strands="forward", progress=False)
    finally:
        hook.remove()
    assert len(shapes) == len(c1) and 3 in shapes  # one pass per variant, some with no reference window
    _same(single, default)
