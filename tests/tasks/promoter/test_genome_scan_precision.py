"""Scan precision: a genome scan defaults to ``auto`` (bf16 only where the hardware has bf16 units, else fp32),
sequences keep fp32 (exactly the training run's evaluation), and a bf16 scan scores the same windows as fp32 within
a small tolerance."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bioattn import precision as precision_module
from bioattn.cli import main as bioattn_main
from tests.helpers.files import write_fasta

RNG = np.random.default_rng(1)
GENOME = {"chr1": "".join(RNG.choice(list("ACGT"), size=900)), "chr2": "".join(RNG.choice(list("ACGT"), size=400))}


@pytest.fixture(scope="module")
def genome(tmp_path_factory) -> Path:
    return write_fasta(tmp_path_factory.mktemp("genome") / "genome.fa", GENOME)


def scan(run: Path, fasta: Path, output: Path, *flags: str) -> int:
    return bioattn_main(["predict", "promoter", "--model", str(run), "--input", str(fasta), "--output", str(output),
                         "--window", "40", "--stride", "10", "--batch-size", "16", "--device", "cpu", *flags])


def bedgraph(path: Path) -> tuple[list[tuple[str, int, int]], np.ndarray]:
    rows = [line.split("\t") for line in path.read_text().splitlines()[1:]]
    return [(c, int(s), int(e)) for c, s, e, _ in rows], np.array([float(p) for *_, p in rows])


@pytest.mark.parametrize("native, expected", [(True, "bf16"), (False, "fp32")])
def test_a_scan_defaults_to_auto_precision(tiny_promoter_run, genome, tmp_path, monkeypatch, capsys, native,
                                           expected):
    monkeypatch.setattr(precision_module, "has_native_bf16", lambda device: native)
    default, chosen = tmp_path / "default.bedGraph", tmp_path / "chosen.bedGraph"
    assert scan(tiny_promoter_run, genome, default) == 0
    assert f"in {expected}" in capsys.readouterr().err
    assert scan(tiny_promoter_run, genome, chosen, "--precision", expected) == 0
    assert default.read_bytes() == chosen.read_bytes()


def test_sequences_default_to_fp32_even_with_bf16_units(tiny_promoter_run, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(precision_module, "has_native_bf16", lambda device: True)
    fasta = tmp_path / "reads.fa"
    fasta.write_text("".join(f">s{i}\n{GENOME['chr1'][i * 50:(i + 1) * 50]}\n" for i in range(6)))
    default, fp32 = tmp_path / "default.csv", tmp_path / "fp32.csv"
    flags = ["predict", "promoter", "--model", str(tiny_promoter_run), "--input", str(fasta), "--device", "cpu"]
    assert bioattn_main([*flags, "--output", str(default)]) == 0
    assert "in fp32" in capsys.readouterr().err
    assert bioattn_main([*flags, "--output", str(fp32), "--precision", "fp32"]) == 0
    assert default.read_bytes() == fp32.read_bytes()


@pytest.mark.parametrize("native, expected", [(True, "bf16"), (False, "fp32")])
def test_auto_precision_scans_in_bf16_only_on_bf16_hardware(tiny_promoter_run, genome, tmp_path, monkeypatch, capsys, native,
                                                            expected):
    monkeypatch.setattr(precision_module, "has_native_bf16", lambda device: native)
    assert scan(tiny_promoter_run, genome, tmp_path / "auto.bedGraph", "--precision", "auto") == 0
    assert f"in {expected}" in capsys.readouterr().err


def test_bf16_scan_scores_the_same_windows_as_fp32_within_tolerance(tiny_promoter_run, genome, tmp_path):
    fp32, bf16 = tmp_path / "fp32.bedGraph", tmp_path / "bf16.bedGraph"
    assert scan(tiny_promoter_run, genome, fp32, "--precision", "fp32") == 0
    assert scan(tiny_promoter_run, genome, bf16, "--precision", "bf16") == 0
    (tiles32, p32), (tiles16, p16) = bedgraph(fp32), bedgraph(bf16)
    assert tiles16 == tiles32 and len(tiles32) > 50
    assert np.abs(p16 - p32).max() <= 0.02  # the documented tolerance on GUE prom_core_all dev is 0.012
    assert not np.array_equal(p16, p32)  # bf16 really ran: some probability moved
