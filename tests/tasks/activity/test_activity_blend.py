"""The blend ``bioattn train activity`` saves: its ends are the deep model and the motif ridge baseline, the weight
chosen on validation rows follows whichever part predicts, and the flags that set it fail with one clear line."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from bioattn.cli import main
from bioattn.data.dna import encode
from bioattn.errors import UserInputError
from bioattn.models.activity import ActivityRegressor
from bioattn.tasks.activity.branches import (
    MotifSet,
    blend_with_ridge,
    choose_deep_weight,
    load_motif_set,
    motif_feature_matrix,
)
from bioattn.tasks.activity.scores import fit_feature_ridge

SITE = "TGACTCA"


def site_set() -> MotifSet:
    """Two matrices: the planted site and a decoy."""
    site = np.full((4, len(SITE)), -2.0)
    for column, base in enumerate(SITE):
        site[" ACGT".index(base) - 1, column] = 1.5
    decoy = np.random.default_rng(0).normal(size=(4, 5))
    return MotifSet({"ids": ["site", "decoy"], "names": ["SITE", "DECOY"], "widths": [7, 5], "bins": 2,
                     "source": "test"}, [site, decoy])


def planted_rows(n: int, seed: int) -> tuple[torch.Tensor, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids, values = [], []
    for _ in range(n):
        sequence = list(rng.choice(list("ACGT"), 40))
        copies = int(rng.integers(0, 3))
        for slot in rng.choice(4, copies, replace=False):
            sequence[slot * 10 + 1 : slot * 10 + 8] = SITE
        ids.append(encode("".join(sequence)))
        values.append([copies + 0.1 * rng.normal()])
    return torch.as_tensor(np.stack(ids), dtype=torch.long), np.array(values)


def tiny_model() -> ActivityRegressor:
    return ActivityRegressor(input_length=40, channels=8, embed_dim=8, num_heads=2, num_layers=1, target_mean=[1.0],
                             target_sd=[0.8]).eval()


def test_a_blend_runs_from_the_deep_model_to_the_motif_ridge() -> None:
    tokens, values = planted_rows(120, seed=1)
    test_tokens, _ = planted_rows(30, seed=2)
    deep, motifs = tiny_model(), site_set()
    only_deep = blend_with_ridge(deep, tokens, values, deep_weight=1.0, motif_set=motifs)
    np.testing.assert_allclose(only_deep.predict_tokens(test_tokens), deep.predict_tokens(test_tokens), atol=1e-5)
    only_ridge = blend_with_ridge(deep, tokens, values, deep_weight=0.0, motif_set=motifs)
    baseline = fit_feature_ridge(motif_feature_matrix(tokens, motifs), values)
    expected = baseline.predict(motif_feature_matrix(test_tokens, motifs)).reshape(-1, 1)
    np.testing.assert_allclose(only_ridge.predict_tokens(test_tokens), expected, atol=1e-4)
    assert only_ridge.motifs["ids"] == ["site", "decoy"]  # the saved model names its motifs


def test_the_chosen_weight_follows_the_part_that_predicts() -> None:
    tokens, values = planted_rows(160, seed=3)
    fit, val = slice(0, 120), slice(120, 160)
    noise = np.random.default_rng(4).normal(size=(160, 6))
    informative = motif_feature_matrix(tokens, site_set())
    # a "deep" model that predicts well: a blend that is all motif ridge on the planted site
    exact = blend_with_ridge(tiny_model(), tokens[fit], values[fit], deep_weight=0.0, motif_set=site_set())
    weight, table = choose_deep_weight(exact, (noise[fit], values[fit]), (tokens[val], noise[val], values[val]))
    assert table[f"{weight:.1f}"] == max(table.values())  # the weight whose blend correlates best
    assert weight >= 0.5 and table["1.0"] > table["0.0"] + 0.5  # the predictive deep model keeps the weight
    torch.manual_seed(0)
    weight, table = choose_deep_weight(tiny_model(), (informative[fit], values[fit]),
                                       (tokens[val], informative[val], values[val]))
    # an untrained deep model: the blend keeps the ridge's correlation instead of falling to the deep model's
    assert table[f"{weight:.1f}"] >= table["0.0"] > 0.8 > abs(table["1.0"]) + 0.3


def test_a_user_meme_file_feeds_the_motif_branch(tmp_path: Path) -> None:
    meme = tmp_path / "mine.meme"
    meme.write_text("MEME version 4\n\nALPHABET= ACGT\n\nstrands: + -\n\n"
                    "MOTIF m1 AP1\nletter-probability matrix: alength= 4 w= 3\n"
                    "0.9 0.03 0.04 0.03\n0.1 0.1 0.7 0.1\n0.05 0.05 0.05 0.85\n")
    motifs = load_motif_set(str(meme), bins=1)
    assert motifs.config["ids"] == ["m1"] and motifs.config["widths"] == [3] and motifs.config["source"] == "mine.meme"
    with pytest.raises(UserInputError, match="needs a motif database"):
        load_motif_set("none")


@pytest.mark.parametrize("flag, message", [
    (["--deep-weight", "1.5"], "--deep-weight must be auto or in [0, 1]"),
    (["--motif-bins", "0"], "--motif-bins >= 1"),
])
def test_blend_flags_are_checked_before_anything_is_read(tmp_path: Path, capsys, flag: list[str],
                                                         message: str) -> None:
    run = tmp_path / "run"
    assert main(["train", "activity", "--train", str(tmp_path / "absent.tsv"), "--out", str(run), *flag]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and message in err and not run.exists()


def test_deep_weight_accepts_auto_or_a_number_only(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["train", "activity", "--train", "x.tsv", "--out", str(tmp_path / "r"), "--deep-weight", "half"])
    assert "expected auto or a number in [0, 1], got 'half'" in capsys.readouterr().err
