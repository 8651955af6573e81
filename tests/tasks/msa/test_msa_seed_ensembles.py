"""`bioattn train msa --seeds`: one run per seed and their ensemble, on the tiny planted alignments of
``tests/helpers/msa_family.py``."""
from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from bioattn.cli import main as cli_main
from bioattn.data.msa import MSATokenizer, read_msa
from bioattn.io import load_tensors
from bioattn.models import load_pretrained
from bioattn.models.ensemble import Ensemble
from bioattn.models.msa_contact import MSAContactModel
from bioattn.tasks.msa.train import SEEDS_COLUMN
from bioattn.tasks.msa.head import ContactHead, feature_names
from bioattn.tasks.driver import check_metrics
from tests.helpers.msa_family import COLUMNS, write_family_data_root  # tiny planted alignments + hairpin structures

SEEDS = ("0", "1")
#: What a one-seed run writes, so every seed's folder too.
RUN_FILES = ("config.json", "model.safetensors", "features.safetensors", "contacts.npy", "contacts.rr", "contact_map.png",
             "metrics.json", "contact_head.json", "train_log.csv", "prepare.json")


@pytest.fixture(scope="module")
def seeded(family, tmp_path_factory) -> tuple[Path, str]:  # noqa: F811
    """A two-seed run on the tiny family with a head reading attention (so the seeds' contacts differ); its stdout."""
    folder = tmp_path_factory.mktemp("seeds")
    ContactHead(tuple(feature_names(2, 2, ["potts_apc"])), (0.2, 0.1, 0.2, 0.1, 1.0), -3.0, ("famA", "famB")).save(
        folder / "head.json")
    out, printed = folder / "run", io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert cli_main(["train", "msa", "--input", str(family["msa"]), "--pdb", str(family["pdb"]), "--out", str(out),
                         "--quick", "--contact-head", str(folder / "head.json"), "--seeds", *SEEDS]) == 0
    return out, printed.getvalue()


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_each_seed_is_a_complete_run_and_the_ensemble_contacts_are_their_mean(seeded):
    out, _ = seeded
    for seed in SEEDS:
        for name in RUN_FILES:
            assert (out / f"seed{seed}" / name).is_file(), f"seed{seed}/{name}"
    members = [np.load(out / f"seed{seed}" / "contacts.npy") for seed in SEEDS]
    assert not np.allclose(members[0], members[1])  # the seeds' models differ
    np.testing.assert_allclose(np.load(out / "contacts.npy"), np.mean(members, axis=0), atol=1e-7)
    assert (out / "contacts.rr").read_text().startswith("PFRMAT RR") and (out / "contact_map.png").is_file()
    assert ContactHead.load(out / "contact_head.json").features == ContactHead.load(out / "seed0" / "contact_head.json").features


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_seed_independent_maps_are_computed_once(seeded):
    out, _ = seeded
    first, second = (load_tensors(out / f"seed{seed}" / "features.safetensors") for seed in SEEDS)
    assert torch.equal(first["potts_apc"], second["potts_apc"])
    info = json.loads((out / "seed1" / "prepare.json").read_text())
    assert "potts_apc" in info["maps_from_another_seed"] and "potts_cpu_s" not in info["cpu_seconds"]
    assert "potts_cpu_s" in json.loads((out / "seed0" / "prepare.json").read_text())["cpu_seconds"]


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_metrics_give_each_seed_their_mean_sd_and_the_ensemble(seeded):
    out, printed = seeded
    metrics = json.loads((out / "metrics.json").read_text())
    check_metrics(metrics)
    assert metrics["members"] == ["seed0", "seed1"] and metrics["protocol"]["seeds"] == [int(seed) for seed in SEEDS]
    per_seed = [json.loads((out / f"seed{seed}" / "metrics.json").read_text())["model"] for seed in SEEDS]
    assert [metrics["seeds"][f"seed{seed}"] for seed in SEEDS] == per_seed
    for name in ("P@L/5", "P@L/2", "P@L"):
        values = [run[name] for run in per_seed]
        spread = metrics["seeds_mean_sd"][name]
        assert spread["mean"] == pytest.approx(np.mean(values)) and spread["sd"] == pytest.approx(np.std(values, ddof=1))
        assert 0.0 <= metrics["model"][name] <= 1.0
    assert {"potts_apc", "gaussian_dca_apc", "mi_apc"} <= set(metrics["baselines"])
    for label in ("| seed0 |", "| seed1 |", "| mean ± sd over seeds |", "| ensemble of 2 seeds |", "| Potts+APC |"):
        assert label in printed


@pytest.mark.slow
def test_the_run_loads_as_an_ensemble_and_serves_predict_and_explain(seeded, family, tmp_path, capsys):  # noqa: F811
    out, _ = seeded
    model = load_pretrained(out, expect=MSAContactModel)
    assert isinstance(model, Ensemble) and len(model.members) == 2 and isinstance(load_pretrained(out), Ensemble)
    tokens = MSATokenizer().encode(read_msa(family["msa"]))[None, :8]  # (1, 8, L)
    logits, maps = model(tokens)
    expected = torch.stack([torch.softmax(member(tokens)[0], dim=-1) for member in model.members]).mean(0)
    assert maps is None and torch.allclose(torch.softmax(logits, dim=-1), expected, atol=1e-6)
    with pytest.raises(TypeError, match="attention maps"):
        model(tokens, need_weights=True)

    pred = tmp_path / "pred"
    assert cli_main(["predict", "msa", "--input", str(family["msa"]), "--model", str(out), "--out", str(pred), "--quick",
                     "--top", "5"]) == 0
    assert "mean of the contact probabilities of 2 seeds" in capsys.readouterr().out
    predicted = load_pretrained(pred, expect=MSAContactModel)  # one model per seed of the run, trained on the new alignment
    assert isinstance(predicted, Ensemble) and len(predicted.members) == 2
    assert predicted.members[0].config["embed_dim"] == model.members[0].config["embed_dim"]
    members = [np.load(pred / f"seed{seed}" / "contacts.npy") for seed in SEEDS]
    assert not np.allclose(members[0], members[1])
    np.testing.assert_allclose(np.load(pred / "contacts.npy"), np.mean(members, axis=0), atol=1e-7)
    assert np.load(pred / "contacts.npy").shape == (COLUMNS, COLUMNS)
    for run_dir in (pred, pred / "seed0"):  # --top reaches every RR file
        rr_pairs = [line for line in (run_dir / "contacts.rr").read_text().splitlines() if line[:1].isdigit()]
        assert len(rr_pairs) == 5
    assert json.loads((pred / "metrics.json").read_text())["cpu_seconds"]["total"] > 0
    assert cli_main(["explain", "msa", "--model", str(out), "--input", str(family["msa"]), "--pdb", str(family["pdb"]),
                     "--out", str(tmp_path / "explain"), "--method", "rollout", "--no-faithfulness"]) == 0
    assert "explaining its first member, seed0" in capsys.readouterr().err
    assert json.loads((tmp_path / "explain" / "summary.json").read_text())["member"] == "seed0"


@pytest.mark.parametrize("argv, message", [
    (["--seeds", "1", "1"], "--seeds needs one or more distinct seeds, got [1, 1]"),
    (["--all", "--compare-methods", "--seeds", "0", "1"], "--compare-methods trains none"),
    (["--init-from", "msa-axial-pfam", "--no-finetune", "--seeds", "0", "1"], "--no-finetune trains none"),
])
def test_bad_seeds_are_one_error_line_and_nothing_is_written(family, tmp_path, capsys, argv, message):  # noqa: F811
    source = [] if "--all" in argv else ["--input", str(family["msa"])]
    code = cli_main(["train", "msa", *source, "--out", str(tmp_path / "run"), "--quick", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0]
    assert not (tmp_path / "run").exists()


def test_msa_takes_no_cross_validation(family, tmp_path, capsys):  # noqa: F811
    with pytest.raises(SystemExit):
        cli_main(["train", "msa", "--input", str(family["msa"]), "--out", str(tmp_path / "run"), "--cv", "3"])
    assert "unrecognized arguments: --cv 3" in capsys.readouterr().err


@pytest.mark.slow
def test_all_with_seeds_reports_each_family_and_resumes_finished_seeds(tmp_path, capsys):
    write_family_data_root(tmp_path / "data")
    out = tmp_path / "all"
    argv = ["train", "msa", "--all", "--data-root", str(tmp_path / "data"), "--families", "famA,famB", "--out", str(out),
            "--quick", "--coevolution", "gaussian", "--seeds", *SEEDS]
    assert cli_main(argv) == 0
    assert SEEDS_COLUMN in capsys.readouterr().out and SEEDS_COLUMN in (out / "summary.md").read_text()
    rows = json.loads((out / "summary.json").read_text())["families"]
    assert [row["family"] for row in rows] == ["famA", "famB"]
    for row in rows:
        assert set(row["seeds"]) == {"seed0", "seed1"} and "attention_only" in row["variants"]
        assert isinstance(load_pretrained(out / row["family"], expect=MSAContactModel), Ensemble)
        for seed in SEEDS:  # leave-one-family-out heads, fitted on the same seed's model of the other family
            assert row["family"] not in json.loads((out / row["family"] / f"seed{seed}" / "metrics.json").read_text())["method"]
    assert ContactHead.load(out / "contact_head.json").fit_on == ("famA/seed0", "famA/seed1", "famB/seed0", "famB/seed1")

    log = (out / "famB" / "seed1" / "train_log.csv").read_text()
    assert cli_main([*argv, "--resume"]) == 0  # finished seeds are skipped
    assert (out / "famB" / "seed1" / "train_log.csv").read_text() == log
