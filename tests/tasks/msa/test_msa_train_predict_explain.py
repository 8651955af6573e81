"""`bioattn train msa` → `bioattn predict msa` → `bioattn explain msa` on tiny synthetic alignments the tests write
(``tests/helpers/msa_family.py``).

The alignment has a planted coevolving pair of columns; the structure is a hairpin in which those columns touch.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bioattn.cli import main as cli_main
from bioattn.data.contacts import read_contact_scores
from bioattn.models.msa_contact import MSAContactModel
from bioattn.tasks.msa.head import ContactHead, feature_names
from bioattn.tasks.driver import check_metrics
from tests.helpers import REPO_ROOT
from tests.helpers.msa_family import COLUMNS, PLANTED, contact_lines, query_of, write_family_data_root


# family (the tiny planted alignment and its structure): a session fixture of conftest.py


@pytest.fixture(scope="module")
def trained(msa_quick_run) -> Path:
    """The session's quick run on the family (conftest.py)."""
    return msa_quick_run


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_train_writes_model_probabilities_and_the_head_it_used(trained):
    for name in ("config.json", "model.safetensors", "features.safetensors", "contact_map.png", "train_log.csv",
                 "contact_head.json", "metrics.json"):
        assert (trained / name).is_file(), name
    probabilities = np.load(trained / "contacts.npy")
    assert probabilities.shape == (COLUMNS, COLUMNS) and np.allclose(probabilities, probabilities.T)
    assert 0 <= probabilities.min() and probabilities.max() <= 1
    metrics = json.loads((trained / "metrics.json").read_text())
    assert metrics["calibrated"] and "model" not in metrics  # no structure, no precision
    assert ContactHead.load(trained / "contact_head.json").features == ("potts_apc",)  # the shipped default head
    assert MSAContactModel.from_pretrained(trained).config["num_layers"] == 2  # --quick size


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_train_without_an_applicable_head_says_its_scores_are_uncalibrated(family, tmp_path, capsys):
    out = tmp_path / "run"
    assert cli_main(["train", "msa", "--input", str(family["msa"]), "--out", str(out), "--quick", "--coevolution", "gaussian"]) == 0
    printed = capsys.readouterr()
    assert "uncalibrated scores" in printed.err
    # no structure: the table of — says why, and how to give one
    assert "no structure given" in printed.out and "--pdb FILE" in printed.out and "--struct-dat FILE" in printed.out
    assert "REMARK scores are NOT calibrated probabilities" in (out / "contacts.rr").read_text()
    assert not json.loads((out / "metrics.json").read_text())["calibrated"] and not (out / "contact_head.json").exists()
    contacts = contact_lines(out / "contacts.rr")
    assert all(0.0 <= p <= 1.0 for _, _, p in contacts)
    assert {contacts[0][:2], contacts[1][:2]} == {(i + 1, j + 1) for i, j in PLANTED}  # the Gaussian DCA ranking


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_under_torchrun_only_the_main_process_prints_the_info_lines(family, tmp_path, capsys, monkeypatch):
    import bioattn.tasks.msa.train as train_module

    monkeypatch.setattr(train_module, "is_main_process", lambda: False)  # as on rank 1 of a torchrun launch
    assert cli_main(["train", "msa", "--input", str(family["msa"]), "--out", str(tmp_path / "run"), "--quick",
                     "--coevolution", "gaussian"]) == 0
    printed = capsys.readouterr()
    assert "uncalibrated scores" not in printed.err and "no structure given" not in printed.out, printed


@pytest.mark.slow
def test_predict_finds_the_planted_pairs_and_writes_a_casp_rr_file(family, tmp_path, capsys):
    out = tmp_path / "pred"
    assert cli_main(["predict", "msa", "--input", str(family["msa"]), "--out", str(out), "--quick"]) == 0
    assert "potts_apc" in capsys.readouterr().out
    lines = (out / "contacts.rr").read_text().splitlines()
    assert lines[:3] == ["PFRMAT RR", "TARGET tiny", "AUTHOR bioattn"]
    assert lines[3].startswith("METHOD ") and "MODEL  1" in lines and lines[-1] == "END"
    assert lines[lines.index("MODEL  1") + 1] == query_of(family["msa"])
    contacts = contact_lines(out / "contacts.rr")
    assert len(contacts) == 2 * COLUMNS  # default: top 2L
    assert all(1 <= i < j <= COLUMNS and j - i >= 6 and 0.0 <= p <= 1.0 for i, j, p in contacts)
    assert [p for _, _, p in contacts] == sorted((p for _, _, p in contacts), reverse=True)
    assert {contacts[0][:2], contacts[1][:2]} == {(i + 1, j + 1) for i, j in PLANTED}  # 1-based
    probabilities = np.load(out / "contacts.npy")
    back = read_contact_scores(out / "contacts.rr", COLUMNS)
    listed = np.isfinite(back)
    assert listed.sum() == 2 * len(contacts)
    np.testing.assert_allclose(back[listed], probabilities[listed], atol=1e-6)
    assert (out / "contact_map.png").read_bytes()[:4] == b"\x89PNG"
    assert not (out / "model.safetensors").exists()  # the default head reads no attention: no model trained


@pytest.mark.slow
def test_predict_top_and_min_separation(family, tmp_path):
    out = tmp_path / "pred"
    assert cli_main(["predict", "msa", "--input", str(family["msa"]), "--out", str(out), "--quick",
                     "--top", "7", "--min-separation", "12"]) == 0
    contacts = contact_lines(out / "contacts.rr")
    assert len(contacts) == 7 and all(j - i >= 12 for i, j, _ in contacts)


@pytest.mark.slow
def test_predict_with_a_structure_evaluates_it(family, tmp_path):
    out = tmp_path / "pred"
    assert cli_main(["predict", "msa", "--contact-method", "potts", "--input", str(family["msa"]), "--pdb", str(family["pdb"]),
                     "--out", str(out), "--quick"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    check_metrics(metrics)
    assert set(metrics["model"]) == {"P@L/5", "P@L/2", "P@L"}
    assert metrics["headline"] == {"metric": "P@L/5", "model": "model", "split": "structure",
                                   "value": metrics["model"]["P@L/5"], "sd": None}
    assert {"potts_apc", "mi_apc", "gaussian_dca_apc"} <= set(metrics["baselines"])
    assert metrics["model"]["P@L/5"] >= 2 / 6  # the two planted pairs touch in the hairpin: 2 of the top L/5 = 6
    assert metrics["model"] == metrics["baselines"]["potts_apc"]  # a one-feature head keeps the Potts ranking


@pytest.mark.slow
def test_predict_with_a_head_reading_attention_trains_the_model(family, tmp_path):
    names = feature_names(2, 2, ["potts_apc"])
    ContactHead(tuple(names), (0.2, 0.1, 0.2, 0.1, 1.0), -3.0, ("famA", "famB")).save(tmp_path / "head.json")
    out = tmp_path / "pred"
    assert cli_main(["predict", "msa", "--input", str(family["msa"]), "--contact-head", str(tmp_path / "head.json"),
                     "--out", str(out), "--quick", "--embed-dim", "8"]) == 0
    model = MSAContactModel.from_pretrained(out)
    assert (model.config["num_layers"], model.config["num_heads"]) == (2, 2)
    assert model.contact_head.weight.flatten().tolist() == pytest.approx([0.2, 0.1, 0.2, 0.1, 1.0])
    assert "fitted on famA, famB" in (out / "contacts.rr").read_text()


@pytest.mark.slow
def test_explain_reads_the_trained_model_on_the_alignment(trained, family, tmp_path):
    out = tmp_path / "explain"
    assert cli_main(["explain", "msa", "--model", str(trained), "--input", str(family["msa"]), "--pdb", str(family["pdb"]),
                     "--out", str(out)]) == 0
    rows = (out / "head_contacts.tsv").read_text().splitlines()
    assert rows[0].split("\t") == ["layer", "head", "P@L/5", "P@L/2", "P@L"] and len(rows) == 1 + 2 * 2
    assert (out / "heads_layer1.png").is_file()


def test_a_contact_head_of_another_model_is_refused_before_anything_is_written(family, tmp_path, capsys):
    ContactHead(tuple(feature_names(4, 4, ["potts_apc"])), (0.1,) * 17, 0.0).save(tmp_path / "head.json")
    code = cli_main(["train", "msa", "--input", str(family["msa"]), "--contact-head", str(tmp_path / "head.json"),
                     "--out", str(tmp_path / "run"), "--quick"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "head.json: fitted on other features than this model's 5" in err[0]
    assert "use --layers 4 --heads 4 --coevolution potts" in err[0]
    assert not (tmp_path / "run").exists()


BAD_INPUTS = {
    "ragged": (">a\nACDEFGHIKL\n>b\nACDEFGHIK\n", r"bad\.a3m, line 3 \(record 'b'\): 9 aligned columns, but the first record has 10"),
    "unknown character": (">a\nACDEFGHIKL\n>b\nACDEF1HIKL\n", r"bad\.a3m, line 3 \(record 'b'\): character '1' at aligned column 6"),
    "empty": ("", r"bad\.a3m: no sequences \(empty alignment\)"),
}


@pytest.mark.parametrize("verb", ["train", "predict"])
@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_alignment_is_one_error_line_and_exit_2(tmp_path, capsys, verb, case):
    content, message = BAD_INPUTS[case]
    (tmp_path / "bad.a3m").write_text(content)
    code = cli_main([verb, "msa", "--input", str(tmp_path / "bad.a3m"), "--out", str(tmp_path / "run"), "--quick"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ")
    assert re.search(message, err[0])
    assert not (tmp_path / "run").exists()  # nothing written for bad input


def test_predict_refuses_a_run_without_a_contact_head(tmp_path, family, capsys):
    (tmp_path / "run").mkdir()
    code = cli_main(["predict", "msa", "--input", str(family["msa"]), "--model", str(tmp_path / "run"), "--out", str(tmp_path / "o")])
    assert code == 2 and "run: no contact_head.json" in capsys.readouterr().err


@pytest.mark.slow
def test_all_fits_heads_leave_one_out_resumes_and_serves_predict(tmp_path, family, capsys):
    write_family_data_root(tmp_path / "data")
    out = tmp_path / "all"
    argv = ["train", "msa", "--all", "--data-root", str(tmp_path / "data"), "--out", str(out), "--quick",
            "--coevolution", "gaussian"]
    assert cli_main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())["families"]
    assert [row["family"] for row in summary] == ["famA", "famB", "famC"]
    assert "| **mean** |" in (out / "summary.md").read_text() and "| famB | 30 | 50 |" in capsys.readouterr().out
    for row in summary:
        assert row["family"] not in row["method"] and "attention_only" in row["variants"]  # leave-one-family-out
    head = ContactHead.load(out / "contact_head.json")
    assert head.fit_on == ("famA", "famB", "famC") and head.features[-2:] == ("gaussian_dca_apc", "mi_apc")
    assert ContactHead.load(out / "coevolution_head.json").features == ("gaussian_dca_apc", "mi_apc")

    log = (out / "famA" / "train_log.csv").read_text()
    assert cli_main([*argv[:-1], "potts", "--resume"]) == 0  # adds the Potts map, trains nothing again
    assert (out / "famA" / "train_log.csv").read_text() == log
    assert "potts_apc" in json.loads((out / "famA" / "metrics.json").read_text())["baselines"]

    prediction = tmp_path / "pred"
    assert cli_main(["predict", "msa", "--input", str(family["msa"]), "--model", str(out), "--out", str(prediction), "--quick"]) == 0
    assert ContactHead.load(prediction / "contact_head.json").features == head.features[:-2] + ("potts_apc",)


@pytest.mark.slow
def test_recipe_script_is_a_wrapper_of_train_msa(tmp_path):
    (tmp_path / "bad.aln").write_text("ACDE\nACD\n")
    done = subprocess.run([sys.executable, str(REPO_ROOT / "recipes" / "msa_contacts.py"), "--input", str(tmp_path / "bad.aln"),
                           "--out", str(tmp_path / "run")], capture_output=True, text=True, cwd=REPO_ROOT, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: ") and "bad.aln, line 2 (record 'row1')" in done.stderr


# ------------------------------------------------------------------------------------------ real data
@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_train_on_a_real_family_compares_with_the_baselines(require_data, tmp_path):
    folder = require_data("msa", "coev", "1mkcA00")
    out = tmp_path / "run"
    assert cli_main(["train", "msa", "--input", str(folder / "1mkcA00.aln"), "--pdb", str(folder / "1mkcA00.pdb"),
                     "--out", str(out), "--quick", "--max-minutes", "0.05", "--epochs", "1"]) == 0
    probabilities = np.load(out / "contacts.npy")
    assert probabilities.shape == (43, 43)
    metrics = json.loads((out / "metrics.json").read_text())
    assert {"mi_apc", "gaussian_dca_apc", "potts_apc"} <= set(metrics["baselines"])
    assert all(0.0 <= value <= 1.0 for value in metrics["model"].values())
    assert MSAContactModel.from_pretrained(out).config["extra_contact_features"] == ["potts_apc"]


@pytest.mark.parametrize("case", ["wrong structure", "missing chain"])
def test_bad_structure_is_one_error_line_and_exit_2(require_data, tmp_path, capsys, case):
    folder = require_data("msa", "coev", "1mkcA00")
    (tmp_path / "q.a3m").write_text(">q\nMWWWWWHHHHHHPPPPPPGGGGGGKKKKKK\n>r\nMWWWWWHHHHHHPPPPPPGGGGGGKKKKKR\n")
    msa = str(tmp_path / "q.a3m") if case == "wrong structure" else str(folder / "1mkcA00.aln")
    argv = ["--input", msa, "--pdb", str(folder / "1mkcA00.pdb"), "--out", str(tmp_path / "run")]
    if case == "missing chain":
        argv += ["--chain", "Z"]
    code = cli_main(["predict", "msa", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    expected = "its sequence does not match the query" if case == "wrong structure" else "chain 'Z' not found; protein chains in the file: 'A'"
    assert "1mkcA00.pdb" in err[0] and expected in err[0]
    assert not (tmp_path / "run").exists()
