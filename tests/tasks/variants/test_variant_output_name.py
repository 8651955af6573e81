"""``bioattn predict variants --output-name NAME``: of a model of several outputs (one per cell type), exactly that
output's numbers under the standard column names (``ref_score alt_score delta``; ``BIOATTN_DELTA`` in a VCF), and
an unknown name is one ``error:`` line listing the model's outputs, exit status 2, nothing written."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bioattn.cli import main
from bioattn.tasks.variants.predict import score_variants
from tests.helpers.tiny_activity import write_activity_run

RNG = np.random.default_rng(5)
E1 = "".join(RNG.choice(list("ACGT"), 70))
OUTPUTS = ("hepg2", "wtc11")


def _other(base: str) -> str:
    return "A" if base != "A" else "C"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("output_name")
    (root / "ref.fa").write_text(f">e1\n{E1}\n")
    (root / "calls.vcf").write_text(
        "##fileformat=VCFv4.2\n##contig=<ID=e1,length=70>\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
        f"e1\t35\trs1\t{E1[34]}\t{_other(E1[34])}\t.\t.\t.\n"
        f"e1\t12\trs2\t{E1[11]}\t{_other(E1[11])}\t.\t.\t.\n")
    return {"ref": root / "ref.fa", "vcf": root / "calls.vcf",
            "model": write_activity_run(root / "model", targets=OUTPUTS),
            "cv": write_activity_run(root / "cv", "fold", members=2, targets=OUTPUTS)}


def _command(files: dict[str, Path], model: str = "model") -> list[str]:
    return ["predict", "variants", "--model", str(files[model]), "--reference", str(files["ref"]),
            "--input", str(files["vcf"]), "--device", "cpu"]


def test_output_name_writes_exactly_that_outputs_columns_unsuffixed(files, tmp_path) -> None:
    every = score_variants(files["model"], files["ref"], files["vcf"])
    assert {"delta_hepg2", "delta_wtc11"} <= set(every.columns)  # without the flag: every output, suffixed
    assert not np.allclose(every["delta_hepg2"], every["delta_wtc11"])  # the outputs differ: the choice shows
    out = tmp_path / "wtc11.tsv"
    assert main([*_command(files), "--output", str(out), "--output-name", "wtc11"]) == 0
    table = pd.read_csv(out, sep="\t")
    assert list(table.columns) == ["chrom", "pos", "id", "ref", "alt", "ref_score", "alt_score", "delta"]
    for column in ("ref_score", "alt_score", "delta"):
        np.testing.assert_allclose(table[column], every[f"{column}_wtc11"], rtol=1e-5, atol=1e-6)  # as written


def test_output_name_of_an_ensemble_keeps_its_spread_and_matches_ignoring_case(files) -> None:
    every = score_variants(files["cv"], files["ref"], files["vcf"])
    one = score_variants(files["cv"], files["ref"], files["vcf"], output_name="HepG2")
    assert list(one.columns)[-4:] == ["ref_score", "alt_score", "delta", "delta_sd"]
    np.testing.assert_allclose(one["delta"], every["delta_hepg2"], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(one["delta_sd"], every["delta_sd_hepg2"], rtol=1e-6, atol=1e-9)


def test_a_vcf_output_puts_the_chosen_outputs_delta_in_the_standard_field(files, tmp_path) -> None:
    from cyvcf2 import VCF

    every = score_variants(files["model"], files["ref"], files["vcf"])
    out = tmp_path / "scored.vcf"
    assert main([*_command(files), "--output", str(out), "--output-name", "hepg2"]) == 0
    reader = VCF(str(out))
    ids = {line.info().get("ID") for line in reader.header_iter() if line.type == "INFO"}
    assert {"BIOATTN_REF", "BIOATTN_ALT", "BIOATTN_DELTA"} <= ids
    assert not any(name.endswith(("_hepg2", "_wtc11")) for name in ids)
    deltas = [record.INFO.get("BIOATTN_DELTA") for record in reader]
    np.testing.assert_allclose(deltas, every["delta_hepg2"], rtol=1e-4, atol=1e-6)
    assert "scores of output hepg2 (of hepg2, wtc11)" in out.read_text()


def test_an_unknown_output_name_is_one_error_line_and_nothing_is_written(files, tmp_path, capsys) -> None:
    out = tmp_path / "scores.tsv"
    assert main([*_command(files), "--output", str(out), "--output-name", "k562"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and len(err.splitlines()) == 1
    assert "'k562'" in err and "hepg2, wtc11" in err
    assert not out.exists() and not list(tmp_path.iterdir())
