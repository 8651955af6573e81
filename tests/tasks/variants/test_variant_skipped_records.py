"""Records are never lost without a name: an id column in the scores, a repeated record scored once and listed,
every allele skipped by --skip-invalid / --skip-indels listed with its reason in OUTPUT.skipped.tsv and, in a VCF
output, in the BIOATTN_SKIPPED INFO field; N and IUPAC alleles are their own category, not indels."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bioattn.errors import UserInputError
from bioattn.tasks.variants.predict import predict_variants, score_variants
from tests.tasks.variants.test_variant_scoring import StandIn

RNG = np.random.default_rng(5)
C1 = "".join(RNG.choice(list("ACGT"), 60))
C1 = C1[:29] + "N" + C1[30:]  # an N in the reference at position 30
HEAD = "##fileformat=VCFv4.2\n##contig=<ID=c1,length=60>\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"


def _other(base: str) -> str:
    return "A" if base != "A" else "C"


@pytest.fixture
def ref(tmp_path: Path) -> Path:
    path = tmp_path / "ref.fa"
    path.write_text(f">c1\n{C1}\n")
    return path


def _vcf(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "calls.vcf"
    path.write_text(HEAD + "".join(line + "\n" for line in lines))
    return path


SNV = f"c1\t10\trs10\t{C1[9]}\t{_other(C1[9])}\t.\t.\t."
SNV2 = f"c1\t40\t.\t{C1[39]}\t{_other(C1[39])}\t.\t.\t."


def test_the_table_names_each_row(tmp_path, ref) -> None:
    table = score_variants(StandIn(), ref, _vcf(tmp_path, SNV, SNV2))
    assert list(table.columns[:5]) == ["chrom", "pos", "id", "ref", "alt"]
    assert list(table["id"]) == ["rs10", f"c1:40:{C1[39]}:{_other(C1[39])}"]


def test_a_duplicate_record_is_scored_once_and_listed(tmp_path, ref) -> None:
    model = StandIn()
    out = tmp_path / "scores.tsv"
    result = predict_variants(model, ref, _vcf(tmp_path, SNV, SNV2, SNV), out)
    assert result.records == 3 and result.variants == 2 and result.skipped["duplicate"] == 1
    assert len(pd.read_csv(out, sep="\t")) == 2
    listed = pd.read_csv(tmp_path / "scores.skipped.tsv", sep="\t")
    assert list(listed.columns) == ["id", "chrom", "pos", "ref", "alt", "reason", "detail", "record"]
    assert listed[["id", "reason"]].values.tolist() == [["rs10", "duplicate"]]
    assert "calls.vcf:4" in listed["detail"].iloc[0] and listed["record"].iloc[0].startswith("calls.vcf:6")
    assert "skipped alleles listed in" in result.describe(out)


@pytest.mark.parametrize("line, shown", [
    (f"c1\t20\t.\t{C1[19]}\tR\t.\t.\t.", "ALT R"),  # an IUPAC alternative allele (G>R)
    ("c1\t30\t.\tN\tA\t.\t.\t.", "REF N"),  # a REF N where the reference has N
])
def test_n_and_iupac_alleles_are_their_own_category(tmp_path, ref, line, shown) -> None:
    path = _vcf(tmp_path, SNV, line)
    with pytest.raises(UserInputError, match=rf"calls.vcf:5 .*{shown} is not a base A, C, G or T.*--skip-invalid"):
        score_variants(StandIn(), ref, path)
    with pytest.raises(UserInputError, match="not a base"):  # not an indel: --skip-indels does not skip it
        score_variants(StandIn(), ref, path, skip_indels=True)
    result = predict_variants(StandIn(), ref, path, tmp_path / "out.tsv", skip_invalid=True)
    assert result.skipped["ambiguous"] == 1 and result.skipped["indel"] == 0 and result.variants == 1
    listed = pd.read_csv(tmp_path / "out.skipped.tsv", sep="\t")
    assert listed["reason"].tolist() == ["ambiguous"] and shown in listed["detail"].iloc[0]


def test_skipped_indels_and_invalid_records_are_listed_by_name(tmp_path, ref) -> None:
    indel = f"c1\t12\tdel12\t{C1[11]}{C1[12]}\t{C1[11]}\t.\t.\t."
    wrong = f"c1\t15\tbadref\t{_other(C1[14])}\tG\t.\t.\t."
    outside = "c1\t61\t.\tA\tC\t.\t.\t."
    path = _vcf(tmp_path, SNV, indel, wrong, outside)
    out = tmp_path / "scores.tsv"
    result = predict_variants(StandIn(), ref, path, out, skip_indels=True, skip_invalid=True)
    assert result.variants == 1 and result.skipped["indel"] == 1 and result.skipped["invalid"] == 2
    listed = pd.read_csv(tmp_path / "scores.skipped.tsv", sep="\t")
    assert listed["id"].tolist() == ["del12", "badref", "c1:61:A:C"]
    assert listed["reason"].tolist() == ["indel", "invalid", "invalid"]
    assert "does not match the reference base" in listed["detail"].iloc[1]
    assert "outside c1" in listed["detail"].iloc[2]


def test_a_vcf_output_gives_the_reason_in_info(tmp_path, ref) -> None:
    from cyvcf2 import VCF

    multi = f"c1\t25\tmulti\t{C1[24]}\t{_other(C1[24])},{C1[24]}TT\t.\t.\t."  # one SNV and one indel allele
    path = _vcf(tmp_path, SNV, multi, f"c1\t20\t.\t{C1[19]}\tR\t.\t.\t.", SNV)
    out = tmp_path / "annotated.vcf"
    predict_variants(StandIn(), ref, path, out, skip_indels=True, skip_invalid=True)
    records = list(VCF(str(out)))
    assert [r.INFO.get("BIOATTN_SKIPPED") for r in records] == [None, ".,indel", "ambiguous", "duplicate"]
    assert records[1].INFO.get("BIOATTN_DELTA_gata")[0] is not None  # the SNV allele of the record is scored
    assert (tmp_path / "annotated.skipped.tsv").is_file()


def test_no_listing_without_skipped_records_and_names_for_gzip_outputs(tmp_path, ref) -> None:
    out = tmp_path / "clean.tsv"
    predict_variants(StandIn(), ref, _vcf(tmp_path, SNV, SNV2), out)
    from bioattn.tasks.variants.predict import skipped_path

    assert not skipped_path(out).exists()
    assert skipped_path(tmp_path / "x.vcf.gz") == tmp_path / "x.skipped.tsv" and skipped_path("-") is None
