"""Variant-effect scoring: VCF/TSV input, window placement, strand averaging, TSV/VCF output, saturation maps, and
the Python API against the command line, with a tiny activity-model stand-in on tiny files the tests write."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bioattn.cli import main
from bioattn.errors import UserInputError
from bioattn.tasks.variants.predict import score_variants
from tests.helpers import REPO_ROOT
from tests.helpers.files import write_fasta

RNG = np.random.default_rng(7)
C1 = "".join(RNG.choice(list("ACGT"), 120))
C2 = "".join(RNG.choice(list("ACGT"), 12))  # shorter than the model's window
VCF_HEAD = "##fileformat=VCFv4.2\n##contig=<ID=c1,length=120>\n##contig=<ID=c2,length=12>\n" \
           "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"


class StandIn:
    """An ActivityRegressor-like model: two outputs that depend on the strand and on positions."""

    input_length = 20
    target_names = ["gata", "gc_left"]

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def predict(self, sequences):
        self.calls.append(list(sequences))
        out = np.zeros((len(sequences), 2))
        for i, s in enumerate(sequences):
            out[i, 0] = s.count("GA") + 0.5 * s.count("A")
            out[i, 1] = sum((j + 1) * (c in "GC") for j, c in enumerate(s)) / 10.0
        return out

    def embed(self, sequences):
        return np.array([[s.count(b) for b in "ACGT"] for s in sequences], dtype=float)


def rc(seq: str) -> str:
    return seq[::-1].translate(str.maketrans("ACGT", "TGCA"))


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    ref = write_fasta(tmp_path / "ref.fa", {"c1": C1, "c2": C2})
    (tmp_path / "ref.fa").write_text(f">c1 gene_strand=-\n{C1}\n>c2\n{C2}\n")
    vcf = tmp_path / "calls.vcf"
    vcf.write_text(VCF_HEAD + f"c1\t50\trs1\t{C1[49]}\t{'A' if C1[49] != 'A' else 'C'},{'G' if C1[49] != 'G' else 'T'}\t.\t.\t.\n"
                   f"c1\t3\trs2\t{C1[2]}\t{'T' if C1[2] != 'T' else 'A'}\t.\t.\t.\n"
                   f"c2\t6\trs3\t{C2[5]}\t{'C' if C2[5] != 'C' else 'G'}\t.\t.\t.\n")
    return {"ref": ref, "vcf": vcf, "dir": tmp_path}


def _vcf(tmp_path: Path, line: str) -> Path:
    path = tmp_path / "one.vcf"
    path.write_text(VCF_HEAD + line)
    return path


def test_multi_allelic_records_are_split(files) -> None:
    table = score_variants(StandIn(), files["ref"], files["vcf"])
    assert list(table[["chrom", "pos"]].itertuples(index=False, name=None)) == [("c1", 50), ("c1", 50), ("c1", 3), ("c2", 6)]
    assert table["alt"].iloc[0] != table["alt"].iloc[1]
    assert (table["ref"].iloc[:2] == C1[49]).all()


def test_indels_are_scored_or_skipped_by_choice(files, tmp_path) -> None:
    path = _vcf(tmp_path, f"c1\t10\t.\t{C1[9]}\t{C1[9]}TT\t.\t.\t.\n")
    assert score_variants(StandIn(), files["ref"], path)["kind"].tolist() == ["insertion"]  # see test_variant_indels.py
    (files["dir"] / "mixed.vcf").write_text(path.read_text() + f"c1\t20\t.\t{C1[19]}\t{'A' if C1[19] != 'A' else 'C'}\t.\t.\t.\n")
    out = files["dir"] / "mixed.tsv"
    assert main(["predict", "variants", "--model", "unused", "--reference", str(files["ref"]), "--input",
                 str(files["dir"] / "mixed.vcf"), "--output", str(out)]) == 2  # unknown model: error before anything
    from bioattn.tasks.variants.predict import predict_variants

    result = predict_variants(StandIn(), files["ref"], files["dir"] / "mixed.vcf", out, skip_indels=True)
    assert result.skipped["indel"] == 1 and result.variants == 1
    assert len(pd.read_csv(out, sep="\t")) == 1


@pytest.mark.parametrize("line, problem", [
    ("c1\t50\t.\t{wrong}\tA\t.\t.\t.\n", r"one.vcf:5 \(c1:50\): REF {wrong} does not match the reference base"),
    ("chr9\t5\t.\tA\tC\t.\t.\t.\n", r"one.vcf:5 \(chr9:5\): contig 'chr9' is not in the reference"),
    ("c2\t13\t.\tA\tC\t.\t.\t.\n", r"one.vcf:5 \(c2:13\): position 13 is outside c2 \(1-12\)"),
])
def test_bad_records_name_the_record(files, tmp_path, line, problem) -> None:
    wrong = "A" if C1[49] != "A" else "C"
    path = _vcf(tmp_path, line.format(wrong=wrong))
    with pytest.raises(UserInputError, match=problem.format(wrong=wrong)):
        score_variants(StandIn(), files["ref"], path)
    from bioattn.tasks.variants.predict import predict_variants

    good = f"c1\t20\t.\t{C1[19]}\t{'A' if C1[19] != 'A' else 'C'}\t.\t.\t.\n"
    path.write_text(VCF_HEAD + line.format(wrong=wrong) + good)
    result = predict_variants(StandIn(), files["ref"], path, tmp_path / "out.tsv", skip_invalid=True)
    assert result.skipped["invalid"] == 1 and result.variants == 1


def test_tsv_input_matches_vcf_input(files) -> None:
    tsv = files["dir"] / "calls.tsv"
    pd.DataFrame({"chrom": ["c1", "c1", "c2"], "pos": [50, 3, 6], "id": ["rs1", "rs2", "rs3"],
                  "ref": [C1[49], C1[2], C2[5]],
                  "alt": [f"{'A' if C1[49] != 'A' else 'C'},{'G' if C1[49] != 'G' else 'T'}",
                          "T" if C1[2] != "T" else "A", "C" if C2[5] != "C" else "G"]}).to_csv(tsv, sep="\t", index=False)
    pd.testing.assert_frame_equal(score_variants(StandIn(), files["ref"], tsv), score_variants(StandIn(), files["ref"], files["vcf"]))
    bad = files["dir"] / "bad.tsv"
    bad.write_text("chrom\tpos\tref\talt\nc1\tten\tA\tC\n")
    with pytest.raises(UserInputError, match=r"bad.tsv:2: position 'ten' is not an integer"):
        score_variants(StandIn(), files["ref"], bad)


def test_windows_put_the_variant_at_the_offset_and_differ_in_one_base(files) -> None:
    import pyfaidx

    from bioattn.tasks.variants.records import Variant
    from bioattn.tasks.variants.score import variant_windows

    fasta = pyfaidx.Fasta(str(files["ref"]), as_raw=True)
    alt = "A" if C1[59] != "A" else "C"
    refs, alts, weights, where = variant_windows(fasta, [Variant("c1", 60, C1[59], alt, 0, 0, "x")], [5, 10, 15], 20)
    for k, offset in enumerate([5, 10, 15]):
        start = 59 - offset
        assert refs[0][k].tobytes().decode() == C1[start : start + 20]
        assert where[0, k] == offset
        differ = np.flatnonzero(refs[0][k] != alts[0][k])
        assert list(differ) == [offset] and chr(alts[0][k][offset]) == alt
    assert weights.tolist() == [[1, 1, 1]]
    # near the start: windows shifted to fit, repeated windows counted once
    refs, alts, weights, where = variant_windows(fasta, [Variant("c1", 2, C1[1], alt, 0, 0, "x")], [5, 10, 15], 20)
    assert all(r.tobytes().decode() == C1[:20] for r in refs[0]) and where[0].tolist() == [1, 1, 1]
    assert weights.sum() == 1
    # a contig shorter than the window is read whole
    refs, _, _, where = variant_windows(fasta, [Variant("c2", 6, C2[5], "A", 0, 0, "x")], [10], 20)
    assert refs[0][0].tobytes().decode() == C2 and where[0, 0] == 5


def test_strand_averaging_and_gene_orientation(files) -> None:
    forward = score_variants(StandIn(), files["ref"], files["vcf"], offsets=[10], strands="forward")
    both = score_variants(StandIn(), files["ref"], files["vcf"], offsets=[10], strands="both")
    start = 49 - 10
    window = C1[start : start + 20]
    alt = both["alt"].iloc[0]
    mutated = window[:10] + alt + window[11:]
    model = StandIn()
    expected = model.predict([window, rc(window), mutated, rc(mutated)])
    assert forward["ref_score_gata"].iloc[0] == pytest.approx(expected[0, 0])
    assert both["ref_score_gata"].iloc[0] == pytest.approx((expected[0, 0] + expected[1, 0]) / 2)
    assert both["delta_gc_left"].iloc[0] == pytest.approx((expected[2, 1] + expected[3, 1] - expected[0, 1] - expected[1, 1]) / 2)
    assert forward["ref_score_gata"].iloc[0] != pytest.approx(both["ref_score_gata"].iloc[0])
    oriented = score_variants(StandIn(), files["ref"], files["vcf"], offsets=[10], strands="forward", gene_orientation=True)
    assert oriented["ref_score_gc_left"].iloc[0] == pytest.approx(expected[1, 1])  # c1 is gene_strand=-
    assert oriented["ref_score_gc_left"].iloc[3] == pytest.approx(forward["ref_score_gc_left"].iloc[3])  # c2 is not


def test_ref_and_alt_windows_go_in_one_batch(files) -> None:
    model = StandIn()
    score_variants(model, files["ref"], files["vcf"], offsets=[5, 10], strands="both")
    assert len(model.calls) == 1  # every window of the file in one predict call, identical windows once
    assert len(model.calls[0]) == len(set(model.calls[0]))


def test_tsv_columns_and_vcf_info(files) -> None:
    out = files["dir"] / "scores.tsv"
    from bioattn.tasks.variants.predict import predict_variants

    predict_variants(StandIn(), files["ref"], files["vcf"], out)
    table = pd.read_csv(out, sep="\t")
    assert list(table.columns) == ["chrom", "pos", "id", "ref", "alt", "ref_score_gata", "alt_score_gata", "delta_gata",
                                   "ref_score_gc_left", "alt_score_gc_left", "delta_gc_left"]
    np.testing.assert_allclose(table["delta_gata"], table["alt_score_gata"] - table["ref_score_gata"], atol=1e-5)
    annotated = files["dir"] / "scores.vcf"
    predict_variants(StandIn(), files["ref"], files["vcf"], annotated)
    from cyvcf2 import VCF

    reader = VCF(str(annotated))
    assert any("bioattn_variant_scoring" in line for line in reader.raw_header.splitlines())
    records = list(reader)
    assert [r.ID for r in records] == ["rs1", "rs2", "rs3"]
    first = records[0].INFO.get("BIOATTN_DELTA_gata")
    assert len(first) == 2 and first[0] == pytest.approx(table["delta_gata"].iloc[0], rel=1e-4)
    assert records[0].INFO.get("BIOATTN_REF_gata") == pytest.approx(table["ref_score_gata"].iloc[0], rel=1e-4)


def test_one_output_has_plain_columns_and_api_equals_cli(files) -> None:
    out = files["dir"] / "cli.tsv"
    code = main(["predict", "variants", "--model", "gue-prom-core-all", "--reference", str(files["ref"]),
                 "--input", str(files["vcf"]), "--output", str(out), "--device", "cpu"])
    assert code == 0
    written = pd.read_csv(out, sep="\t")
    assert list(written.columns) == ["chrom", "pos", "id", "ref", "alt", "ref_score", "alt_score", "delta"]
    api = score_variants("gue-prom-core-all", files["ref"], files["vcf"])
    pd.testing.assert_frame_equal(written, api, check_exact=False, rtol=1e-5, atol=1e-6)


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_saturation_table_and_heatmap(files) -> None:
    out = files["dir"] / "sat.tsv"
    code = main(["predict", "variants", "--model", "gue-prom-core-all", "--reference", str(files["ref"]),
                 "--saturation", "--region", "c1:11-40", "--output", str(out)])
    assert code == 0
    table = pd.read_csv(out, sep="\t")
    assert len(table) == 3 * 30
    assert set(table["pos"]) == set(range(11, 41))
    assert all((table["alt"] != table["ref"]))
    png = out.with_suffix(".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_torchrun_two_processes_write_the_one_process_file(files) -> None:
    import os
    import subprocess
    import sys

    root = REPO_ROOT
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    flags = ["predict", "variants", "--model", "gue-prom-core-all", "--reference", str(files["ref"]), "--input",
             str(files["vcf"]), "--device", "cpu"]
    one, two = files["dir"] / "one.tsv", files["dir"] / "two.tsv"
    assert main([*flags, "--output", str(one)]) == 0  # one process: this one (one torch thread, the CPU)
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           "-m", "bioattn.cli", *flags, "--output", str(two)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert two.read_bytes() == one.read_bytes()
