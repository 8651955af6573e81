"""Genome scans (``bioattn predict promoter --window``) on a synthetic two-chromosome FASTA: window coordinates,
bedGraph tiling, BED thresholds, agreement with per-sequence prediction, indexing, and bad inputs."""
from __future__ import annotations

import csv
import gzip
from pathlib import Path

import numpy as np
import pytest
import torch
from Bio import bgzf

from bioattn.cli import main as bioattn_main
from bioattn.models.promoter import PromoterClassifier
from bioattn.tasks.promoter import scan as promoter_scan
from bioattn.tasks.promoter.scan import WindowGrid
from tests.helpers.files import write_fasta

WINDOW, STRIDE = 40, 20
RNG = np.random.default_rng(0)
CHROMOSOMES = {
    "chrA": "".join(RNG.choice(list("ACGTacgt"), size=1000)),  # soft-masked (lower-case) stretches
    "chrB": "".join(RNG.choice(list("ACGT"), size=100)) + "N" * 150 + "".join(RNG.choice(list("ACGT"), size=83)),
    "chrC": "ACGTTGCAAC",  # shorter than one window
}


def read_rows(path: Path, delimiter: str = ",", header: bool = True) -> list:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle, delimiter=delimiter)) if header else list(csv.reader(handle, delimiter=delimiter))


@pytest.fixture(scope="module")
def genome(tmp_path_factory) -> Path:
    return write_fasta(tmp_path_factory.mktemp("genome") / "genome.fa", CHROMOSOMES)


def scan(run_dir: Path, fasta: Path, output: Path, *flags: str) -> int:
    """The command in fp32 (a scan's default, ``auto``, is bf16 on some CPUs: tests/tasks/promoter/test_genome_scan_precision.py), so that
    outputs compare exactly with each other and with sequence prediction."""
    return bioattn_main(["predict", "promoter", "--model", str(run_dir), "--input", str(fasta), "--output", str(output),
                         "--batch-size", "16", "--precision", "fp32", *flags])


@pytest.fixture(scope="module")
def windows_csv(tiny_promoter_run, genome, tmp_path_factory) -> list[dict[str, str]]:
    out = tmp_path_factory.mktemp("scan") / "windows.csv"
    assert scan(tiny_promoter_run, genome, out, "--window", str(WINDOW), "--stride", str(STRIDE)) == 0
    return read_rows(out)


def expected_windows(length: int) -> list[tuple[int, int]]:
    if length <= WINDOW:
        return [(0, length)]
    starts = list(range(0, length - WINDOW + 1, STRIDE))
    if starts[-1] != length - WINDOW:
        starts.append(length - WINDOW)
    return [(s, s + WINDOW) for s in starts]


def test_window_grid_tiles_partition_the_sequence():
    for length, window, stride in [(1000, 40, 20), (333, 40, 20), (10, 40, 20), (101, 10, 10), (57, 7, 3), (40, 40, 5)]:
        grid = WindowGrid(length, window, stride)
        tiles = [grid.tile(i) for i in range(len(grid))]
        assert tiles[0][0] == 0 and tiles[-1][1] == length
        assert all(a[1] == b[0] for a, b in zip(tiles, tiles[1:])) and all(s < e for s, e in tiles)
        for i, (start, end) in enumerate(tiles):  # each base of a tile is nearest to its own window's centre
            centres = [sum(grid.span(k)) / 2 for k in range(len(grid))]
            for base in (start, end - 1):
                assert abs(base + 0.5 - centres[i]) <= min(abs(base + 0.5 - c) for c in centres) + 0.5


def test_csv_windows_have_the_right_coordinates_and_skip_only_n(windows_csv):
    for name, sequence in CHROMOSOMES.items():
        rows = [(int(r["start"]), int(r["end"])) for r in windows_csv if r["chrom"] == name]
        expected = [(s, e) for s, e in expected_windows(len(sequence)) if set(sequence[s:e]) != {"N"}]
        assert rows == expected
    assert all(0.0 <= float(r["probability"]) <= 1.0 for r in windows_csv)
    assert len({r["probability"] for r in windows_csv}) > 10  # windows really get different scores


def test_scan_probabilities_equal_predict_on_the_window_sequences(tiny_promoter_run, windows_csv, tmp_path):
    fasta = tmp_path / "windows.fa"
    fasta.write_text("".join(f">w{i}\n{CHROMOSOMES[r['chrom']][int(r['start']):int(r['end'])]}\n"
                             for i, r in enumerate(windows_csv)))
    out = tmp_path / "per_sequence.csv"
    assert bioattn_main(["predict", "promoter", "--model", str(tiny_promoter_run), "--input", str(fasta),
                         "--output", str(out)]) == 0
    np.testing.assert_allclose([float(r["promoter_probability"]) for r in read_rows(out)],
                               [float(r["probability"]) for r in windows_csv], rtol=0, atol=2e-6)


def test_bedgraph_tiles_each_chromosome_with_the_window_scores(tiny_promoter_run, genome, windows_csv, tmp_path):
    out = tmp_path / "scan.bedGraph"
    assert scan(tiny_promoter_run, genome, out, "--window", str(WINDOW), "--stride", str(STRIDE)) == 0
    lines = out.read_text().splitlines()
    assert lines[0].startswith("track type=bedGraph")
    rows = [line.split("\t") for line in lines[1:]]
    assert [float(r[3]) for r in rows] == [float(r["probability"]) for r in windows_csv]
    chr_a = [(int(r[1]), int(r[2])) for r in rows if r[0] == "chrA"]
    assert chr_a[0][0] == 0 and chr_a[-1][1] == 1000 and all(a[1] == b[0] for a, b in zip(chr_a, chr_a[1:]))
    assert chr_a[1] == (30, 50)  # window [20, 60): the bases nearer its centre than its neighbours'
    chr_b = [(int(r[1]), int(r[2])) for r in rows if r[0] == "chrB"]
    covered = sum(e - s for s, e in chr_b)
    assert 333 - 150 <= covered < 333  # the only-N stretch leaves a gap, nothing overlaps
    assert [r for r in rows if r[0] == "chrC"] == [["chrC", "0", "10", next(w["probability"] for w in windows_csv
                                                                          if w["chrom"] == "chrC")]]


def test_bed_holds_merged_windows_at_or_above_the_threshold(tiny_promoter_run, genome, windows_csv, tmp_path):
    threshold = float(np.median([float(r["probability"]) for r in windows_csv]))
    out = tmp_path / "peaks.bed"
    assert scan(tiny_promoter_run, genome, out, "--window", str(WINDOW), "--stride", str(STRIDE),
                "--threshold", str(threshold)) == 0
    expected = []
    for r in windows_csv:
        chrom, start, end, p = r["chrom"], int(r["start"]), int(r["end"]), float(r["probability"])
        if p < threshold:
            continue
        if expected and expected[-1][0] == chrom and start <= expected[-1][2]:
            expected[-1][2] = max(expected[-1][2], end)
            if p > expected[-1][3]:
                expected[-1][3:] = [p, (start + end) // 2]
        else:
            expected.append([chrom, start, end, p, (start + end) // 2])
    rows = read_rows(out, "\t", header=False)
    # BED8: the summit (centre base of the best window) as thickStart/thickEnd, the strand scoring higher there
    assert [row[:5] + row[6:] for row in rows] == [[c, str(s), str(e), "1", str(round(1000 * p)), str(m), str(m + 1)]
                                                   for c, s, e, p, m in expected]
    assert {row[5] for row in rows} <= {"+", "-", "."}
    assert 0 < len(rows) < sum(float(r["probability"]) >= threshold for r in windows_csv)  # merged


def test_default_window_is_the_model_length_and_bgzip_input_works(tiny_promoter_run, tmp_path):
    plain = write_fasta(tmp_path / "g.fa", CHROMOSOMES)
    packed = tmp_path / "g.fa.gz"
    with bgzf.BgzfWriter(str(packed), "wb") as handle:
        handle.write(plain.read_bytes())
    assert scan(tiny_promoter_run, plain, tmp_path / "a.csv", "--window") == 0
    assert scan(tiny_promoter_run, packed, tmp_path / "b.csv", "--window") == 0
    rows = read_rows(tmp_path / "a.csv")
    assert (tmp_path / "b.csv").read_text() == (tmp_path / "a.csv").read_text()
    assert [(int(r["start"]), int(r["end"])) for r in rows if r["chrom"] == "chrA"][:3] == [(0, 50), (25, 75), (50, 100)]


def test_unwritable_input_folder_indexes_in_a_temporary_folder(tiny_promoter_run, tmp_path, monkeypatch, capsys):
    fasta = write_fasta(tmp_path / "ro.fa", CHROMOSOMES)
    monkeypatch.setattr(promoter_scan.os, "access", lambda path, mode: False)
    assert scan(tiny_promoter_run, fasta, tmp_path / "out.csv", "--window", str(WINDOW)) == 0
    assert "is not writable; indexing ro.fa in a temporary folder" in capsys.readouterr().err
    assert not (tmp_path / "ro.fa.fai").exists() and len(read_rows(tmp_path / "out.csv")) > 10


def test_multiclass_scan_needs_a_class(tmp_path, genome, capsys):
    torch.manual_seed(0)
    PromoterClassifier(max_len=50, embed_dim=16, num_heads=2, num_layers=1, num_classes=3,
                       class_names=["core", "distal", "none"]).save_pretrained(tmp_path / "run")
    assert scan(tmp_path / "run", genome, tmp_path / "x.csv", "--window") == 2
    assert "choose the one to scan for with --class" in capsys.readouterr().err
    assert scan(tmp_path / "run", genome, tmp_path / "x.bedGraph", "--window", "--class", "distal") == 0
    assert "name=bioattn_p_distal" in (tmp_path / "x.bedGraph").read_text().splitlines()[0]
    assert scan(tmp_path / "run", genome, tmp_path / "y.bed", "--window", "--class", "nope") == 2
    assert "--class 'nope' is not a class of this model (core, distal, none)" in capsys.readouterr().err
    assert scan(tmp_path / "run", genome, tmp_path / "z.csv", "--threshold", "0.3") == 2  # per sequence: argmax
    assert "--threshold applies to two-class models and to genome scans" in capsys.readouterr().err


BAD_SCANS = [
    ("unknown extension", "genome", "out.txt", ["--window"], "out.txt: unknown output extension '.txt'"),
    ("bedGraph without --window", "genome", "out.bedGraph", [], "a .bedGraph output is written by a genome scan: add --window"),
    ("window above max_len", "genome", "out.csv", ["--window", "51"], "--window must be between 1 and the model's max_len (50)"),
    ("plain gzip", "gzip", "out.csv", ["--window"], "not gzip; recompress with"),
    ("CSV input", "csv", "out.csv", ["--window"], "needs a FASTA file"),
    ("bad letter", "badletter", "out.csv", ["--window"], "record 'chrZ': invalid character 'U' at position 121"),
    ("ragged FASTA", "ragged", "out.csv", ["--window"], "cannot index this FASTA"),
    ("stride without window", "genome", "out.csv", ["--stride", "5"], "only apply to a genome scan: add --window"),
]


@pytest.mark.parametrize("source, output, flags, fragment", [b[1:] for b in BAD_SCANS], ids=[b[0] for b in BAD_SCANS])
def test_bad_scans_exit_2_with_one_line_and_no_output(tiny_promoter_run, genome, tmp_path, capsys, source, output, flags,
                                                      fragment):
    inputs = {
        "genome": genome,
        "gzip": tmp_path / "g.fa.gz",
        "csv": tmp_path / "g.csv",
        "badletter": write_fasta(tmp_path / "bad.fa", {"chrZ": "ACGT" * 30 + "U" + "ACGT" * 30}),
        "ragged": tmp_path / "ragged.fa",
    }
    inputs["gzip"].write_bytes(gzip.compress(genome.read_bytes()))
    inputs["csv"].write_text("sequence\nACGT\n")
    inputs["ragged"].write_text(">a\nACGTAC\nAC\nACGTAC\n")
    code = scan(tiny_promoter_run, inputs[source], tmp_path / output, *flags)
    err = capsys.readouterr().err.split("\r")[-1]  # after any progress bar, which clears itself
    assert code == 2 and fragment in err, err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert not (tmp_path / output).exists()
