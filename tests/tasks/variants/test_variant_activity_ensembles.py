"""Every model directory 'bioattn train activity' writes (one run, a --seeds ensemble, a --cv ensemble) scores
variants from the command (TSV, VCF, --saturation) and from Python; an ensemble's scores are the mean of its
members' and delta_sd the sample sd of their deltas."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from bioattn.cli import main
from bioattn.models import load_pretrained
from bioattn.tasks.variants.predict import saturation_map, score_variants
from tests.helpers.tiny_activity import tiny_activity_model, write_activity_run

RNG = np.random.default_rng(11)
E1 = "".join(RNG.choice(list("ACGT"), 90))
E2 = "".join(RNG.choice(list("ACGT"), 30))  # shorter than the model's 40-nt window


def _other(base: str) -> str:
    return "A" if base != "A" else "C"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("activity_runs")
    (root / "ref.fa").write_text(f">e1\n{E1}\n>e2\n{E2}\n")
    (root / "calls.vcf").write_text(
        "##fileformat=VCFv4.2\n##contig=<ID=e1,length=90>\n##contig=<ID=e2,length=30>\n"
        "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
        f"e1\t45\trs1\t{E1[44]}\t{_other(E1[44])},{'G' if E1[44] != 'G' else 'T'}\t.\t.\t.\n"
        f"e1\t3\t.\t{E1[2]}\t{_other(E1[2])}\t.\t.\t.\n"
        f"e2\t10\trs3\t{E2[9]}\t{_other(E2[9])}\t.\t.\t.\n")
    return {"root": root, "ref": root / "ref.fa", "vcf": root / "calls.vcf",
            "single": write_activity_run(root / "single"), "seeds": write_activity_run(root / "seeds", "seed"),
            "cv": write_activity_run(root / "cv", "fold"),
            "cv_both": write_activity_run(root / "cv_both", "fold", members=2, strand="both")}


@pytest.mark.parametrize("run", ["seeds", "cv", "cv_both"])
def test_an_ensemble_scores_the_mean_of_its_members_and_their_spread(runs, run) -> None:
    table = score_variants(runs[run], runs["ref"], runs["vcf"])
    assert list(table.columns) == ["chrom", "pos", "id", "ref", "alt", "ref_score", "alt_score", "delta", "delta_sd"]
    members = [score_variants(folder, runs["ref"], runs["vcf"]) for folder in sorted(runs[run].glob("*/"))]
    assert len(members) in (2, 3)
    for column in ("ref_score", "alt_score", "delta"):
        np.testing.assert_allclose(table[column], np.mean([m[column] for m in members], axis=0), rtol=1e-5, atol=1e-6)
    spread = np.std([m["delta"] for m in members], axis=0, ddof=1)
    np.testing.assert_allclose(table["delta_sd"], spread, rtol=1e-4, atol=1e-7)
    assert (table["delta_sd"] > 0).all()  # the members differ


def test_a_single_run_has_no_spread_column(runs) -> None:
    table = score_variants(runs["single"], runs["ref"], runs["vcf"])
    assert list(table.columns) == ["chrom", "pos", "id", "ref", "alt", "ref_score", "alt_score", "delta"]


def _command(runs: dict[str, Path]) -> list[str]:
    return ["predict", "variants", "--model", str(runs["cv"]), "--reference", str(runs["ref"]), "--device", "cpu"]


@pytest.mark.slow
def test_the_command_scores_a_cv_run_to_tsv_and_vcf(runs, tmp_path) -> None:
    base = _command(runs)
    tsv, vcf = tmp_path / "scores.tsv", tmp_path / "scores.vcf"
    assert main([*base, "--input", str(runs["vcf"]), "--output", str(tsv)]) == 0
    written = pd.read_csv(tsv, sep="\t")
    assert list(written["id"]) == ["rs1", "rs1", "e1:3:" + E1[2] + ":" + _other(E1[2]), "rs3"]
    api = score_variants(runs["cv"], runs["ref"], runs["vcf"])
    np.testing.assert_allclose(written["delta_sd"], api["delta_sd"], rtol=1e-5, atol=1e-6)

    assert main([*base, "--input", str(runs["vcf"]), "--output", str(vcf)]) == 0
    from cyvcf2 import VCF

    records = list(VCF(str(vcf)))
    assert records[0].INFO.get("BIOATTN_DELTA_SD")[1] == pytest.approx(written["delta_sd"].iloc[1], rel=1e-4)
    assert records[0].INFO.get("BIOATTN_DELTA")[0] == pytest.approx(written["delta"].iloc[0], rel=1e-4, abs=1e-6)


@pytest.mark.slow  # the heatmap's drawing (matplotlib, logomaker) takes seconds
def test_the_command_draws_a_saturation_map_of_a_cv_run(runs, tmp_path) -> None:
    sat = tmp_path / "sat.tsv"
    assert main([*_command(runs), "--saturation", "--region", "e1:20-29", "--output", str(sat)]) == 0
    table = pd.read_csv(sat, sep="\t")
    assert len(table) == 30 and "delta_sd" in table.columns
    assert sat.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    python = saturation_map(runs["cv"], runs["ref"], "e1:20-29")
    np.testing.assert_allclose(table["delta"], python["delta"], rtol=1e-5, atol=1e-6)


def test_an_ensemble_of_regressors_predicts_the_members_mean(runs) -> None:
    ensemble = load_pretrained(runs["cv"])
    sequences = [E1[:40], E1[10:50], E2]
    members = [load_pretrained(folder) for folder in sorted(runs["cv"].glob("fold*"))]
    expected = np.mean([m.predict(sequences) for m in members], axis=0)
    np.testing.assert_allclose(ensemble.predict(sequences), expected, rtol=1e-5, atol=1e-6)
    out = ensemble(ensemble.tokenize(sequences))
    assert tuple(out["member_values"].shape) == (3, 3, 1)
    torch.testing.assert_close(out["values"], out["member_values"].mean(0))
    assert len(ensemble.member_outputs(ensemble.tokenize(sequences))) == 3
    with pytest.raises(KeyError, match="no single 'embedding'"):
        ensemble.embed(sequences)


def test_members_that_disagree_on_their_window_are_refused(runs, tmp_path) -> None:
    from bioattn.errors import UserInputError
    from bioattn.models.ensemble import Ensemble

    mixed = Ensemble([tiny_activity_model(0), tiny_activity_model(1, input_length=36)])
    with pytest.raises(UserInputError, match="members differ in input_length"):
        score_variants(mixed, runs["ref"], runs["vcf"])
