"""htslib's own messages never reach the terminal (they are written from C to file descriptor 2, so the test reads
the descriptor), and a malformed VCF gets one error line in our words, naming the file and the line."""
from __future__ import annotations

import gzip
import os
import sys
from pathlib import Path

import pytest

from bioattn.cli import main
from bioattn.errors import UserInputError
from bioattn.tasks.variants.predict import open_reference
from bioattn.tasks.variants.records import read_variants

SEQ = "ACGTTGCAAGGCTTACGATCGGATCCATGCAAGTCGATCG"
COLUMNS = "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
RECORD = f"elem1\t10\trs1\t{SEQ[9]}\t{'A' if SEQ[9] != 'A' else 'C'}\t.\t.\t.\n"


@pytest.fixture
def ref(tmp_path: Path) -> Path:
    path = tmp_path / "ref.fa"
    path.write_text(f">elem1\n{SEQ}\n")
    return path


def _read(path: Path, ref: Path):
    with open_reference(ref) as fasta:
        return read_variants(path, fasta)


def test_htslib_warnings_do_not_reach_the_terminal(tmp_path, ref, capfd) -> None:
    path = tmp_path / "no_contig_lines.vcf"  # htslib warns about every contig missing from the header
    path.write_text("##fileformat=VCFv4.2\n" + COLUMNS + RECORD.replace(".\n", "X=1\n"))
    found = _read(path, ref)
    assert [v.id for v in found.variants] == ["rs1"]
    out = tmp_path / "annotated.vcf"
    from bioattn.tasks.variants.predict import predict_variants
    from tests.tasks.variants.test_variant_scoring import StandIn

    predict_variants(StandIn(), ref, path, out)
    err = capfd.readouterr().err
    assert "[W::" not in err and "htslib" not in err and "tabix" not in err, err
    record = out.read_text().splitlines()[-1].split("\t")
    assert record[:3] == ["elem1", "10", "rs1"] and record[7].startswith("X=1;BIOATTN_REF_gata=")  # written whole
    assert "##contig=<ID=elem1>" in out.read_text()


@pytest.mark.parametrize("text, message", [
    ("", r"bad.vcf: empty file \(a VCF starts with ##fileformat"),
    ("##fileformat=VCFv4.2\n" + RECORD, r"bad.vcf: no #CHROM header line"),
    (RECORD, r"bad.vcf: line 1: no ##fileformat header line"),
    (COLUMNS + RECORD, r"bad.vcf: line 1: no ##fileformat header line"),
    ("##fileformat=VCFv4.2\n" + COLUMNS.replace("\t", " ") + RECORD,
     r"bad.vcf: line 2: the #CHROM line must be the tab-separated columns"),
    ("##fileformat=VCFv4.2\n##contig=<ID=elem1,length=40>\n" + COLUMNS + "elem1\t10\trs1\tT\n",
     r"bad.vcf:4: 4 tab-separated columns; a VCF record has at least 8"),
    ("##fileformat=VCFv4.2\n" + COLUMNS + RECORD + RECORD.replace("\t10\t", "\tten\t"),
     r"bad.vcf:4: position 'ten' is not a positive integer"),
])
def test_a_malformed_vcf_is_reported_in_our_words(tmp_path, ref, capfd, text, message) -> None:
    path = tmp_path / "bad.vcf"
    path.write_text(text)
    with pytest.raises(UserInputError, match=message) as raised:
        _read(path, ref)
    assert "format:" not in str(raised.value) and "mode: r" not in str(raised.value)
    err = capfd.readouterr().err
    assert "[E::" not in err and "[W::" not in err, err


def test_the_command_prints_one_error_line_for_a_headerless_gzip_vcf(tmp_path, ref, capfd) -> None:
    path = tmp_path / "calls.vcf.gz"
    with gzip.open(path, "wt") as handle:
        handle.write(RECORD)
    code = main(["predict", "variants", "--model", "gue-prom-core-all", "--reference", str(ref), "--input",
                 str(path), "--output", str(tmp_path / "out.tsv")])
    err = capfd.readouterr().err
    assert code == 2 and err.startswith("error: ") and "no ##fileformat header line" in err
    assert len(err.strip().splitlines()) == 1, err


def test_the_capture_hands_on_what_is_not_htslib(capfd) -> None:
    from bioattn.tasks.variants.vcf import htslib_messages

    with htslib_messages() as messages:
        os.write(2, b"[W::vcf_parse] Contig 'x' is not defined in the header.\n")
        os.write(2, b"a line of our own\n")
        print("from python", file=sys.stderr)
    assert messages == ["Contig 'x' is not defined in the header."]
    err = capfd.readouterr().err
    assert "a line of our own" in err and "from python" in err and "Contig" not in err
