"""Genome-scale scans: --chrom / --regions restrict a scan to the same numbers, bigWig holds the bedGraph's tiles,
torchrun shards merge into the one-process file byte for byte, and ``bioattn --help`` starts without torch."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from bioattn.cli import main as bioattn_main
from bioattn.models.promoter import PromoterClassifier
from bioattn.tasks.promoter.scan import ScanTarget, WindowGrid, shard_targets, window_spans, window_tiles
from tests.helpers import REPO_ROOT

WINDOW, STRIDE = 30, 12
RNG = np.random.default_rng(1)
CHROMOSOMES = {
    "chr1": "".join(RNG.choice(list("ACGT"), size=900)),
    "chr2": "".join(RNG.choice(list("ACGTacgt"), size=400)) + "N" * 80 + "".join(RNG.choice(list("ACGT"), size=77)),
    "chr3": "".join(RNG.choice(list("ACGT"), size=250)),
    "chrM": "ACGTTGCA",
}


def write_fasta(path: Path, chromosomes: dict[str, str]) -> Path:
    path.write_text("".join(f">{name}\n" + "\n".join(seq[i : i + 50] for i in range(0, len(seq), 50)) + "\n"
                            for name, seq in chromosomes.items()))
    return path


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("run")
    PromoterClassifier(max_len=40, embed_dim=16, num_heads=2, num_layers=1, conv_kernel=5).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def genome(tmp_path_factory) -> Path:
    return write_fasta(tmp_path_factory.mktemp("genome") / "genome.fa", CHROMOSOMES)


def scan(run_dir: Path, fasta: Path, output: Path, *flags: str) -> int:
    return bioattn_main(["predict", "promoter", "--model", str(run_dir), "--input", str(fasta), "--output", str(output),
                         "--window", str(WINDOW), "--stride", str(STRIDE), "--batch-size", "8", "--device", "cpu", *flags])


def rows(path: Path) -> list[list[str]]:
    return [line.split("\t") for line in path.read_text().splitlines() if not line.startswith("track")]


@pytest.fixture(scope="module")
def full_scan(run_dir, genome, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("full") / "scan.tsv"
    assert scan(run_dir, genome, out) == 0
    return out


def test_vectorised_windows_and_tiles_match_the_grid():
    for length in (5, 30, 31, 100, 557):
        grid = WindowGrid(length, WINDOW, STRIDE)
        for first, stop in ((0, len(grid)), (1, len(grid)), (0, 1), (len(grid) // 2, len(grid))):
            starts, ends = window_spans(grid, first, stop)
            tile_starts, tile_ends = window_tiles(grid, first, stop)
            assert list(zip(starts.tolist(), ends.tolist())) == [grid.span(i) for i in range(first, stop)]
            assert list(zip(tile_starts.tolist(), tile_ends.tolist())) == [grid.tile(i) for i in range(first, stop)]


def test_shards_cover_every_target_once_balanced_by_length():
    lengths = [5000, 4000, 3000, 2500, 900, 800, 50, 10]
    targets = [ScanTarget(i, f"c{i}", 0, n, n) for i, n in enumerate(lengths)]
    shares = [shard_targets(targets, 3, r, WINDOW, STRIDE) for r in range(3)]
    assert sorted(t.index for share in shares for t in share) == list(range(len(targets)))
    for share in shares:
        assert [t.index for t in share] == sorted(t.index for t in share)  # genome order within a share
    loads = [sum(t.length for t in share) for share in shares]
    assert max(loads) - min(loads) <= max(lengths[3:])


def test_chrom_scans_only_those_sequences_with_the_same_numbers(run_dir, genome, full_scan, tmp_path):
    out = tmp_path / "some.tsv"
    assert scan(run_dir, genome, out, "--chrom", "chr3", "chr1") == 0
    full = rows(full_scan)
    assert rows(out)[1:] == [r for r in full[1:] if r[0] in ("chr1", "chr3")]  # FASTA order, not --chrom order


def test_regions_scan_each_interval_like_a_sequence_of_its_own(run_dir, genome, tmp_path):
    regions = tmp_path / "regions.bed"
    regions.write_text("track name=x\nchr2\t100\t300\nchr1\t10\t80\nchr2\t250\t330\tmerged-with-the-first\n")
    out = tmp_path / "regions.tsv"
    assert scan(run_dir, genome, out, "--regions", str(regions)) == 0
    alone = write_fasta(tmp_path / "alone.fa", {"chr1": CHROMOSOMES["chr1"][10:80], "chr2": CHROMOSOMES["chr2"][100:330]})
    reference = tmp_path / "alone.tsv"
    assert scan(run_dir, alone, reference) == 0
    offsets = {"chr1": 10, "chr2": 100}
    expected = [[c, str(int(s) + offsets[c]), str(int(e) + offsets[c]), p] for c, s, e, p in rows(reference)[1:]]
    assert rows(out)[1:] == expected


@pytest.mark.slow
def test_bigwig_holds_the_bedgraph_tiles(run_dir, genome, tmp_path):
    pyBigWig = pytest.importorskip("pyBigWig")
    bedgraph, bigwig = tmp_path / "scan.bedGraph", tmp_path / "scan.bw"
    assert scan(run_dir, genome, bedgraph) == 0
    assert scan(run_dir, genome, bigwig) == 0
    bw = pyBigWig.open(str(bigwig))
    assert bw.chroms() == {name: len(seq) for name, seq in CHROMOSOMES.items()}
    read = [[c, str(s), str(e), v] for c in CHROMOSOMES for s, e, v in (bw.intervals(c) or [])]
    expected = rows(bedgraph)
    assert [r[:3] for r in read] == [r[:3] for r in expected]
    np.testing.assert_allclose([r[3] for r in read], [float(r[3]) for r in expected], rtol=0, atol=1e-6)  # 6 digits vs float32


@pytest.mark.parametrize("content, fragment", [
    ("chr1\t10\n", "line 1: a BED line needs chrom, start and end"),
    ("chr1\t10\t5\n", "line 1: interval 10-5 is not within chr1"),
    ("chr1\t0\t50\nchrX\t1\t9\n", "line 2: sequence 'chrX' is not in the FASTA"),
    ("chr1\tten\t50\n", "line 1: start and end must be integers"),
])
def test_bad_regions_exit_2_naming_the_line_and_write_nothing(run_dir, genome, tmp_path, capsys, content, fragment):
    regions = tmp_path / "bad.bed"
    regions.write_text(content)
    out = tmp_path / "out.bedGraph"
    assert scan(run_dir, genome, out, "--regions", str(regions)) == 2
    err = capsys.readouterr().err.split("\r")[-1]
    assert err.startswith(f"error: {regions}: {fragment}") and err.count("\n") == 1, err
    assert not out.exists()


def test_help_and_version_import_no_torch_or_monai():
    code = ("import sys\nfrom bioattn.cli import main\n"
            "for argv in (['--version'], ['--help'], ['predict', '--help']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'monai', 'captum', 'numpy', 'Bio'})\n"
            "print('HEAVY', heavy)\n")
    assert "HEAVY []" in _python(code, REPO_ROOT)


def _python(code: str, cwd: Path) -> str:
    """Standard output of ``python -c code`` in a fresh interpreter (what it imports is its own)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_a_scan_imports_no_training_logger_plotting_or_imaging_library(run_dir, genome, tmp_path):
    """The first prediction does not pay for unrelated imports (TensorBoard came in through the trainer)."""
    out = tmp_path / "scan.bedGraph"
    code = ("import sys\nfrom bioattn.cli import main\n"
            f"code = main(['predict', 'promoter', '--model', {str(run_dir)!r}, '--input', {str(genome)!r}, "
            f"'--window', '{WINDOW}', '--stride', '{STRIDE}', '--output', {str(out)!r}])\n"
            "unrelated = {'tensorboard', 'monai', 'captum', 'matplotlib', 'sklearn', 'modiscolite', 'nibabel'}\n"
            "print('CODE', code, 'UNRELATED', sorted({m.split('.')[0] for m in sys.modules} & unrelated))\n")
    assert "CODE 0 UNRELATED []" in _python(code, tmp_path)
    assert out.stat().st_size > 100


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".bedGraph", ".bed", ".bw"])
def test_torchrun_two_processes_write_the_one_process_file_byte_for_byte(run_dir, genome, tmp_path, suffix):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    # --model takes a run directory too; torchrun's own parser would take --run for an abbreviation of --run-path
    flags = ["predict", "promoter", "--model", str(run_dir), "--input", str(genome), "--window", str(WINDOW),
             "--stride", str(STRIDE), "--batch-size", "8", "--device", "cpu", "--threshold", "0.45"]
    one, two = tmp_path / f"one{suffix}", tmp_path / f"two{suffix}"
    assert bioattn_main([*flags, "--output", str(one)]) == 0  # one process: this one (one torch thread, the CPU)
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           "-m", "bioattn.cli", *flags, "--output", str(two)], env=env, capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert two.read_bytes() == one.read_bytes()
    assert one.stat().st_size > 100
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([one.name, two.name])  # no part files left
