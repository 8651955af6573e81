"""Attributions of an activity model on a planted-motif table (the value is 2 where a TATA box sits, 0 elsewhere):
in-silico mutagenesis is highest on the planted box, an ensemble is explained as it predicts (the mean of its
members), and an ensemble's known-motif weights are its members' combined, never an empty list."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from bioattn.tasks.activity.branches import top_motif_weights
from bioattn.tasks.activity.explain import activity_attribution, activity_members
from tests.helpers.activity_models import TATA, fitted_model, save_cv, tata_table


@pytest.fixture(scope="module")
def table() -> tuple[list[str], np.ndarray, np.ndarray]:
    return tata_table(32, seed=0)


@pytest.mark.slow  # over two seconds with the one-time tangermeme start-up
def test_ism_is_highest_on_the_planted_tata_box(table) -> None:
    sequences, values, starts = table
    model = fitted_model(sequences, values)
    assert np.corrcoef(model.predict(sequences)[:, 0], values)[0, 1] > 0.9  # the model reads the box
    carriers = np.flatnonzero(starts >= 0)
    ism = activity_attribution([model], model.tokenize([sequences[k] for k in carriers]), "ism").numpy()
    assert ism.shape == (len(carriers), 40)
    for values_row, start in zip(ism, starts[carriers]):
        assert start <= int(np.argmax(values_row)) < start + len(TATA), start
        outside = np.delete(values_row, np.arange(start, start + len(TATA)))
        assert values_row[start : start + len(TATA)].mean() > 10 * np.abs(outside).mean(), start


@pytest.mark.slow
def test_an_ensemble_is_explained_as_it_predicts(table, tmp_path: Path) -> None:
    sequences, values, _ = table
    members, _ = activity_members(save_cv(tmp_path / "cv", sequences, values), device="cpu")
    assert len(members) == 2
    tokens = members[0].tokenize(sequences[:4])
    for method in ("ism", "gradient_x_input"):
        together = activity_attribution(members, tokens, method)
        alone = torch.stack([activity_attribution([m], tokens, method) for m in members]).mean(0)
        assert torch.allclose(together, alone, atol=1e-5), method
    hypothetical = activity_attribution(members, tokens, "ism", hypothetical=True)
    assert hypothetical.shape == (4, 40, 4) and torch.allclose(hypothetical.sum(-1), torch.zeros(4, 40), atol=1e-5)


def test_known_motif_weights_of_an_ensemble_combine_its_members(table, tmp_path: Path) -> None:
    from bioattn.models import load_pretrained

    sequences, values, _ = table
    folder = save_cv(tmp_path / "cv", sequences, values, deep_weights=(0.2, None))  # fold2: deep model kept alone
    members, _ = activity_members(folder, device="cpu")
    rows = top_motif_weights(members)
    assert rows and rows == top_motif_weights(load_pretrained(folder))  # the list and the loaded Ensemble agree
    (alone,) = [w for w in top_motif_weights(members[0]) if (w["id"], w["score"]) == (rows[0]["id"], rows[0]["score"])]
    top = rows[0]
    assert top["name"] == "TATA box" and top["members_with_branch"] == 1
    assert top["member_weights"] == [pytest.approx(alone["weight"]), 0.0]
    assert top["weight"] == pytest.approx(alone["weight"] / 2) and top["weight_sd"] == pytest.approx(abs(alone["weight"]) / 2)
    assert top_motif_weights(members[1]) == []  # a model without a motif branch has no such weights


@pytest.mark.slow  # about 2 s: three explanations
def test_a_run_that_kept_a_ridge_alone_is_explained_by_ism_not_by_zero_gradients(tmp_path: Path, capsys,
                                                                               monkeypatch) -> None:
    """A run that keeps the k-mer ridge alone scales the deep head to 0: its gradients are 0 everywhere (as good as
    a random ranking), so ``method="auto"`` takes in-silico mutagenesis, the one method that sees the ridge, even
    where ISM would not fit the time budget (simulated: the budgeted choice returns a gradient method), and an
    explicit gradient method is warned about."""
    import bioattn.tasks.activity.explain as activity_explain
    from bioattn.tasks.activity.explain import explain_activity
    from tests.helpers.tiny_activity import tiny_activity_model

    # what resolve_method gives on a large input, where ISM is over the budget: a gradient method for "auto"
    monkeypatch.setattr(activity_explain, "resolve_method",
                        lambda method, *args, **kwargs: "gradient_x_input" if method == "auto" else method)

    model = tiny_activity_model(0)  # random deep part and k-mer branch
    with torch.no_grad():
        model.head[-1].weight.zero_()
        model.head[-1].bias.zero_()
    sequences = ["".join(np.random.default_rng(k).choice(list("ACGT"), 40)) for k in range(6)]
    result = explain_activity(model, sequences, faithfulness=False, plot_sequences=0, known_motif_weights=0,
                              out=tmp_path / "ridge", device="cpu")
    assert result.method == "ism" and np.abs(result.attribution).max() > 0
    assert "linear branches alone" in capsys.readouterr().err
    explain_activity(model, sequences, method="gradient_x_input", faithfulness=False, plot_sequences=0,
                     known_motif_weights=0, out=tmp_path / "gradient", device="cpu")
    assert "warning: the model is its linear branches alone" in capsys.readouterr().err

    deep = tiny_activity_model(0)  # the same model with its deep part: auto keeps the budgeted choice
    chosen = explain_activity(deep, sequences, faithfulness=False, plot_sequences=0, known_motif_weights=0,
                              out=tmp_path / "deep", device="cpu").method
    assert "linear branches alone" not in capsys.readouterr().err and chosen == "gradient_x_input"
