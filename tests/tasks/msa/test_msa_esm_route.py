"""The MSA Transformer route end to end: `bioattn predict msa --contact-method esm-msa --weights`, `explain msa --weights`,
`bioattn models`, and its map as a contact-head feature (`train msa --all --compare-methods --weights`, then
`predict msa --contact-head --weights`), on a tiny random fair-esm checkpoint written here."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from bioattn.cli import main as cli_main
from bioattn.data.msa import read_msa
from bioattn.io import load_tensors
from bioattn.models.msa_transformer import MSATransformer
from bioattn.models.msa_transformer import esm_msa_subsample
from bioattn.tasks.msa.head import ESM_MSA_MAP, ContactHead
from tests.helpers.esm_checkpoint import SMALL, esm, esm_load, esm_model, write_esm_checkpoint  # skips without fair-esm
from tests.helpers.msa_family import COLUMNS, contact_lines, query_of, write_family_data_root


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> Path:
    return write_esm_checkpoint(esm_model(SMALL, seed=3), tmp_path_factory.mktemp("weights") / "esm_msa_tiny.pt")


def fair_esm_contacts(weights: Path, alignment: Path, max_rows: int) -> np.ndarray:
    """What fair-esm predicts on the rows ESM's examples would pick."""
    sequences = read_msa(alignment).sequences
    rows = [(str(i), sequences[i]) for i in esm_msa_subsample(sequences, max_rows)]
    model = esm_load(weights)
    _, _, tokens = esm.Alphabet.from_architecture("msa_transformer").get_batch_converter()(rows)
    with torch.no_grad():
        return model.predict_contacts(tokens)[0].numpy()


def test_predict_esm_msa_writes_fair_esm_contacts_as_the_other_methods_do(family, weights, tmp_path, capsys):
    out = tmp_path / "pred"
    assert cli_main(["predict", "msa", "--contact-method", "esm-msa", "--weights", str(weights), "--esm-max-rows", "20",
                     "--input", str(family["msa"]), "--pdb", str(family["pdb"]), "--out", str(out)]) == 0
    assert "MSA Transformer" in capsys.readouterr().out
    probabilities = np.load(out / "contacts.npy")
    assert probabilities.shape == (COLUMNS, COLUMNS)
    np.testing.assert_allclose(probabilities, fair_esm_contacts(weights, family["msa"], 20), atol=1e-4)
    lines = (out / "contacts.rr").read_text().splitlines()
    assert lines[:3] == ["PFRMAT RR", "TARGET tiny", "AUTHOR bioattn"] and lines[-1] == "END"
    assert lines[lines.index("MODEL  1") + 1] == query_of(family["msa"])
    contacts = contact_lines(out / "contacts.rr")
    assert len(contacts) == 2 * COLUMNS and all(j - i >= 6 and 0 <= p <= 1 for i, j, p in contacts)
    assert (out / "contact_map.png").read_bytes()[:4] == b"\x89PNG"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["calibrated"] and metrics["sequences_used"] == 20 and "MSA Transformer" in metrics["method"]
    assert set(metrics["model"]) == {"P@L/5", "P@L/2", "P@L"} and {"mi_apc", "gaussian_dca_apc"} <= set(metrics["baselines"])
    assert load_tensors(out / "row_attention.safetensors")["row_attention"].shape == (2, 4, COLUMNS, COLUMNS)
    torch.testing.assert_close(torch.sigmoid(load_tensors(out / "features.safetensors")[ESM_MSA_MAP]),
                               torch.from_numpy(probabilities), atol=1e-6, rtol=1e-6)


def test_converted_directory_predicts_the_same(family, weights, tmp_path):
    MSATransformer.from_esm(weights).save_pretrained(tmp_path / "converted")
    runs = {}
    for name, source in (("pt", weights), ("dir", tmp_path / "converted")):
        assert cli_main(["predict", "msa", "--contact-method", "esm-msa", "--weights", str(source), "--input", str(family["msa"]),
                         "--out", str(tmp_path / name)]) == 0
        runs[name] = np.load(tmp_path / name / "contacts.npy")
    np.testing.assert_array_equal(runs["pt"], runs["dir"])


def test_esm_msa_without_weights_or_with_a_bad_file_is_one_error_line(family, tmp_path, capsys):
    argv = ["predict", "msa", "--contact-method", "esm-msa", "--input", str(family["msa"]), "--out", str(tmp_path / "a")]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --contact-method esm-msa needs --weights") and "never downloaded" in err
    assert not (tmp_path / "a").exists()
    broken = tmp_path / "broken.pt"
    broken.write_bytes(b"PK\x03\x04 not really")
    assert cli_main(argv[:-2] + ["--weights", str(broken), "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(broken) in err and not (tmp_path / "b").exists()


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_explain_shows_every_layer_and_head(family, weights, tmp_path, capsys):
    out = tmp_path / "explain"
    assert cli_main(["explain", "msa", "--weights", str(weights), "--input", str(family["msa"]), "--pdb", str(family["pdb"]),
                     "--out", str(out), "--max-rows", "16"]) == 0
    assert "best head layer" in capsys.readouterr().out
    for name in ("heads_layer0.png", "heads_layer1.png", "head_diversity_layer1.png", "head_contact_precision.png",
                 "row_attention.safetensors", "contacts.npy", "summary.json"):
        assert (out / name).is_file(), name
    with open(out / "head_contacts.tsv") as handle:
        table = list(csv.DictReader(handle, delimiter="\t"))
    regression = MSATransformer.from_esm(weights).contact_regression.weight.detach().view(2, 4)
    assert len(table) == 2 * 4 and float(table[5]["regression_weight"]) == pytest.approx(float(regression[1, 1]), abs=1e-6)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows_used"] == 16 and set(summary["best_head"]) == {"layer", "head", "P@L/5", "P@L/2", "P@L"}


def test_models_says_how_to_obtain_the_weights(capsys):
    assert cli_main(["models"]) == 0
    out = capsys.readouterr().out
    assert "esm_msa1b_t12_100M_UR50S.pt" in out and "never downloaded" in out


@pytest.mark.slow
def test_esm_map_joins_the_leave_one_family_out_head_and_serves_predict(family, weights, tmp_path):
    write_family_data_root(tmp_path / "data")
    out = tmp_path / "compare"
    assert cli_main(["train", "msa", "--all", "--compare-methods", "--data-root", str(tmp_path / "data"), "--out", str(out),
                     "--quick", "--weights", str(weights)]) == 0
    summary = json.loads((out / "summary.json").read_text())["families"]
    assert all(ESM_MSA_MAP in row["maps"] for row in summary)
    assert "MSA Transformer (your weights)" in (out / "summary.md").read_text()
    selection = ContactHead.load(out / "contact_head_combined.json").settings["selection"]
    assert {ESM_MSA_MAP, "factored_attention_apc+potts_apc+esm_msa_logit"} <= set(selection)
    head = ContactHead((ESM_MSA_MAP, "potts_apc"), (1.0, 1.0), 0.0)  # a head reading the ESM map beside Potts
    head.save(tmp_path / "head.json")
    argv = ["predict", "msa", "--contact-head", str(tmp_path / "head.json"), "--input", str(family["msa"]), "--quick"]
    assert cli_main(argv + ["--out", str(tmp_path / "no_weights")]) == 2  # the head needs --weights
    assert cli_main(argv + ["--weights", str(weights), "--out", str(tmp_path / "pred")]) == 0
    features = load_tensors(tmp_path / "pred" / "features.safetensors")
    assert set(features) >= {ESM_MSA_MAP, "potts_apc"}
    expected = torch.logit(torch.from_numpy(fair_esm_contacts(weights, family["msa"], 256)).double()).float()
    torch.testing.assert_close(features[ESM_MSA_MAP], expected, atol=1e-3, rtol=1e-4)
