"""MSAContactModel and recipes/msa_contacts.py: invariances, persistence, contact head, outputs, bad input."""
from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from bioattn.cli import run_user_main
from bioattn.data.contacts import read_contact_scores
from bioattn.data import resolve_data_root
from bioattn.data.msa import MSATokenizer
from bioattn.errors import UserInputError
from bioattn.models.msa_contact import MSAContactModel, fit_contact_head, logistic_contact_probabilities, mask_tokens

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes" / "msa_contacts.py"
PAD = MSATokenizer.pad_id


def load_recipe():
    spec = importlib.util.spec_from_file_location("msa_contacts_recipe", RECIPE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tiny_model(**kwargs) -> MSAContactModel:
    torch.manual_seed(0)
    return MSAContactModel(max_len=32, embed_dim=16, num_heads=2, num_layers=2, dropout=0.0, **kwargs).eval()


def data_family_or_skip(name: str) -> Path:
    try:
        folder = resolve_data_root(None) / "msa" / "coev" / name
    except UserInputError:
        pytest.skip("data root not available")
    if not folder.is_dir():
        pytest.skip(f"{name} not in the data root")
    return folder


# ------------------------------------------------------------------------------------------ model
def test_padding_rows_and_columns_does_not_change_predictions():
    model = tiny_model()
    tokens = torch.randint(0, 22, (1, 6, 10))
    padded = torch.full((1, 9, 13), PAD)
    padded[:, :6, :10] = tokens
    logits, maps = model(tokens, need_weights=True)
    logits_padded, maps_padded = model(padded, need_weights=True)
    torch.testing.assert_close(logits_padded[:, :6, :10], logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(maps_padded[..., :10, :10], maps, atol=1e-5, rtol=1e-5)


def test_row_order_does_not_change_contact_features():
    model = tiny_model()
    tokens = torch.randint(0, 22, (1, 6, 10))
    perm = torch.randperm(6)
    torch.testing.assert_close(model.contact_features(tokens[:, perm]), model.contact_features(tokens), atol=1e-5, rtol=1e-5)
    features = model.contact_features(tokens)[0]
    assert features.shape == (10, 10, 4)
    torch.testing.assert_close(features, features.transpose(0, 1))  # symmetrised
    assert (features[..., 0] >= features[..., 1]).all()  # heads sorted per layer


def test_save_and_load_keep_outputs_and_contact_head(tmp_path):
    model = tiny_model(extra_contact_features=["gaussian_dca_apc"])
    model.set_contact_head(np.arange(5, dtype=np.float32), -1.5)
    model.save_pretrained(tmp_path)
    loaded = MSAContactModel.from_pretrained(tmp_path)
    tokens = torch.randint(0, 22, (1, 4, 12))
    torch.testing.assert_close(loaded(tokens)[0], model(tokens)[0])
    features = torch.rand(12, 12, 5)
    torch.testing.assert_close(loaded.contact_probabilities(features), model.contact_probabilities(features))


def test_mask_tokens_never_masks_padding_and_follows_80_10_10():
    tokens = torch.randint(0, 22, (4, 50, 60))
    tokens[:, 40:] = PAD
    masked, chosen = mask_tokens(tokens, 0.15, torch.Generator().manual_seed(0))
    assert not chosen[tokens == PAD].any()
    assert 0.13 < chosen[tokens != PAD].float().mean() < 0.17
    share_masked = (masked[chosen] == MSATokenizer.mask_id).float().mean()
    assert 0.77 < share_masked < 0.83
    assert torch.equal(masked[~chosen], tokens[~chosen])


def test_contact_head_learns_from_other_families_and_ranks_contacts():
    generator = np.random.default_rng(0)

    def family(length):
        distances = generator.uniform(3, 20, (length, length))
        distances = (distances + distances.T) / 2
        signal = (distances < 8).astype(np.float32) + generator.normal(0, 0.3, (length, length))
        features = torch.tensor(np.stack([signal + signal.T, generator.normal(size=(length, length))], -1), dtype=torch.float32)
        return features, distances

    train = [family(40), family(50)]
    weight, bias = fit_contact_head([f for f, _ in train], [d for _, d in train])
    assert weight[0] > 5 * abs(weight[1])
    features, distances = family(45)
    probabilities = logistic_contact_probabilities(features, torch.tensor(weight), bias).numpy()
    upper = np.triu_indices(45, 6)
    top = np.argsort(-probabilities[upper])[:20]
    assert (distances[upper][top] < 8).mean() > 0.9


def test_leave_one_family_out_never_fits_on_the_evaluated_family(tmp_path):
    recipe = load_recipe()
    generator = np.random.default_rng(1)
    run_dirs, targets = {}, {}
    for index, name in enumerate(["famA", "famB", "famC"]):
        model = tiny_model(extra_contact_features=["mi_apc"])
        run_dirs[name] = tmp_path / name
        model.save_pretrained(run_dirs[name])
        length = 30 + index
        distances = generator.uniform(3, 20, (length, length))
        distances = (distances + distances.T) / 2
        recipe.save_tensors(run_dirs[name] / recipe.FEATURES_FILE, {
            "attention": torch.rand(length, length, 4), "mi_apc": torch.tensor(-distances, dtype=torch.float32)})
        targets[name] = type("Target", (), {"distances": distances})()
    heads = recipe.leave_one_out_heads(list(run_dirs), run_dirs, targets, ("mi_apc",))
    for name, head in heads.items():
        assert name not in head["fit_on"] and len(head["fit_on"]) == 2
        assert head["features"][-1] == "mi_apc" and len(head["weight"]) == 5


# ------------------------------------------------------------------------------------------ recipe
def test_recipe_quick_run_writes_predictions_and_metrics(tmp_path):
    folder = data_family_or_skip("1mkcA00")
    out = tmp_path / "run"
    code = run_user_main(lambda: load_recipe().main([
        "--msa", str(folder / "1mkcA00.aln"), "--pdb", str(folder / "1mkcA00.pdb"), "--out", str(out), "--quick",
        "--max-minutes", "0.05", "--epochs", "1",
    ]))
    assert code == 0
    scores = np.load(out / "contacts.npy")
    assert scores.shape == (43, 43)
    np.testing.assert_allclose(read_contact_scores(out / "contacts.rr", 43)[np.triu_indices(43, 1)], scores[np.triu_indices(43, 1)], atol=1e-5)
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["model"]) == {"P@L/5", "P@L/2", "P@L"}
    assert {"mi_apc", "gaussian_dca_apc"} <= set(metrics["baselines"])
    for name in ("contact_map.png", "training_curve.png", "config.json", "model.safetensors", "train_log.csv"):
        assert (out / name).is_file(), name
    assert MSAContactModel.from_pretrained(out).config["extra_contact_features"] == ["potts_apc"]


BAD_INPUTS = {
    "ragged": (">a\nACDEFGHIKL\n>b\nACDEFGHIK\n", r"bad\.a3m, line 3 \(record 'b'\): 9 aligned columns, but the first record has 10"),
    "unknown character": (">a\nACDEFGHIKL\n>b\nACDEF1HIKL\n", r"bad\.a3m, line 3 \(record 'b'\): character '1' at aligned column 6"),
    "empty": ("", r"bad\.a3m: no sequences \(empty alignment\)"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_alignment_is_one_error_line_and_exit_2(tmp_path, capsys, case):
    content, message = BAD_INPUTS[case]
    (tmp_path / "bad.a3m").write_text(content)
    code = run_user_main(lambda: load_recipe().main(["--msa", str(tmp_path / "bad.a3m"), "--out", str(tmp_path / "run")]))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ")
    assert re.search(message, err[0])
    assert not (tmp_path / "run").exists()  # nothing written for bad input


@pytest.mark.parametrize("case", ["wrong structure", "missing chain"])
def test_bad_structure_is_one_error_line_and_exit_2(tmp_path, capsys, case):
    folder = data_family_or_skip("1mkcA00")
    (tmp_path / "q.a3m").write_text(">q\nMWWWWWHHHHHHPPPPPPGGGGGGKKKKKK\n>r\nMWWWWWHHHHHHPPPPPPGGGGGGKKKKKR\n")
    msa = str(tmp_path / "q.a3m") if case == "wrong structure" else str(folder / "1mkcA00.aln")
    argv = ["--msa", msa, "--pdb", str(folder / "1mkcA00.pdb"), "--out", str(tmp_path / "run")]
    if case == "missing chain":
        argv += ["--chain", "Z"]
    code = run_user_main(lambda: load_recipe().main(argv))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    expected = "its sequence does not match the query" if case == "wrong structure" else "chain 'Z' not found; protein chains in the file: 'A'"
    assert "1mkcA00.pdb" in err[0] and expected in err[0]


def test_script_exits_2_without_traceback(tmp_path):
    (tmp_path / "bad.aln").write_text("ACDE\nACD\n")
    done = subprocess.run([sys.executable, str(RECIPE), "--msa", str(tmp_path / "bad.aln"), "--out", str(tmp_path / "run")],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: ") and "bad.aln, line 2 (record 'row1')" in done.stderr


def test_contact_head_of_another_architecture_is_refused_before_training(tmp_path, capsys):
    folder = data_family_or_skip("1mkcA00")
    (tmp_path / "head.json").write_text(json.dumps({"features": ["layer0_head_rank0"], "weight": [1.0], "bias": 0.0}))
    code = run_user_main(lambda: load_recipe().main([
        "--msa", str(folder / "1mkcA00.aln"), "--contact-head", str(tmp_path / "head.json"), "--out", str(tmp_path / "run")]))
    err = capsys.readouterr().err.strip()
    assert code == 2 and "head.json: fitted on other features than this model's 17" in err
    assert not (tmp_path / "run").exists()


def test_contact_head_can_be_resized_for_other_pair_features(tmp_path):
    model = tiny_model(extra_contact_features=["mi_apc"])
    model.set_extra_contact_features(["potts_apc", "gaussian_dca_apc", "mi_apc"])
    assert model.num_contact_features == 2 * 2 + 3
    model.save_pretrained(tmp_path)
    assert MSAContactModel.from_pretrained(tmp_path).config["extra_contact_features"] == ["potts_apc", "gaussian_dca_apc", "mi_apc"]
