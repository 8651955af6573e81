"""Factored attention (one layer, positions → queries/keys, residues → values), `predict msa --contact-method`, head selection."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from bioattn import coevolution
from bioattn.cli import main as cli_main
from bioattn.errors import UserInputError
from bioattn.metrics import precision_at
from bioattn.models.factored_attention import FactoredAttention, fit_factored_attention
from bioattn.tasks.msa import train as msa
from bioattn.tasks.msa import features as msa_features
from bioattn.tasks.msa.head import (
    FACTORED_ATTENTION_MAP,
    SHIPPED_HEADS,
    ContactHead,
    leave_one_out_heads,
    select_head,
    shipped_head,
)
from tests.helpers.msa_family import write_family_data_root  # tiny planted alignments + hairpin structures


def planted_alignment(rows: int = 300, length: int = 12, pair: tuple[int, int] = (2, 9), seed: int = 0) -> torch.Tensor:
    """Random amino acids in which column ``pair[1]`` copies column ``pair[0]`` in 90 % of the rows."""
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 20, (rows, length), generator=generator)
    copy = torch.rand(rows, generator=generator) < 0.9
    tokens[:, pair[1]] = torch.where(copy, tokens[:, pair[0]], tokens[:, pair[1]])
    return tokens


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["coupling", "attention"])
def test_the_planted_pair_ranks_first(kind):
    tokens = planted_alignment()
    model = fit_factored_attention(tokens, torch.ones(len(tokens)), num_heads=4, head_dim=4, steps=120)
    scores = model.contact_map(kind)
    assert torch.allclose(scores, scores.T, atol=1e-5) and torch.all(scores.diagonal() == 0)
    first = divmod(int(scores.triu(1).argmax()), tokens.shape[1])
    assert first == (2, 9)


@pytest.mark.parametrize("schedule", ["cosine", "constant"])
def test_the_learning_rate_follows_the_schedule(schedule, monkeypatch):
    used: list[float] = []
    adam_step = torch.optim.Adam.step

    def recording_step(self, *args, **kwargs):
        used.append(self.param_groups[0]["lr"])
        return adam_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", recording_step)
    fit_factored_attention(planted_alignment(rows=40), torch.ones(40), num_heads=2, head_dim=2, steps=8, lr=0.04,
                           lr_schedule=schedule)
    expected = [0.02 * (1 + np.cos(np.pi * k / 8)) for k in range(8)] if schedule == "cosine" else [0.04] * 8
    assert used == pytest.approx(expected)


def test_an_unknown_schedule_is_refused():
    with pytest.raises(ValueError, match="lr_schedule must be one of"):
        fit_factored_attention(planted_alignment(rows=20), torch.ones(20), steps=2, lr_schedule="linear")


def test_bad_factored_fit_settings_are_clear_errors(family, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "attention"
    code = cli_main(["predict", "msa", "--contact-method", "attention", "--input", str(family["msa"]), "--out", str(out),
                     "--factored-lr", "0"])
    assert code == 2
    assert "--factored-lr > 0" in capsys.readouterr().err
    assert not out.exists()
    with pytest.raises(UserInputError, match="--factored-schedule must be one of cosine, constant, got 'linear'"):
        msa_features.MSAOptions(factored_schedule="linear")


def explicit_couplings(model: FactoredAttention) -> torch.Tensor:
    """``½(U + Uᵀ)`` with ``U[(j, b), (i, a)] = Σ_h A_h[i, j] W_V^h[b, a]``, written out with einsum."""
    length, q = model.length, model.num_states
    implied = torch.einsum("hij,hba->jbia", model.attention(), model.values).reshape(length * q, length * q)
    return 0.5 * (implied + implied.T)


def test_the_implied_couplings_are_the_symmetrised_attention_times_values():
    torch.manual_seed(0)
    model = FactoredAttention(7, num_heads=3, head_dim=5, num_states=4)
    with torch.no_grad():
        model.values.normal_()
    couplings = model.couplings()
    torch.testing.assert_close(couplings, explicit_couplings(model))
    blocks = couplings.view(7, 4, 7, 4)
    assert torch.all(blocks[torch.arange(7), :, torch.arange(7), :] == 0)  # no self-coupling


def test_the_objective_and_gradient_are_the_potts_pseudo_likelihood_of_the_implied_couplings():
    torch.manual_seed(0)
    length, states, rows = 6, 4, 20
    model = FactoredAttention(length, num_heads=3, head_dim=5, num_states=states)
    with torch.no_grad():
        model.values.normal_()
        model.fields.normal_()
        model.fields[:, -1] = 0.0
    tokens, weights = torch.randint(0, states, (rows, length)), torch.rand(rows)
    value = model.pseudo_likelihood(tokens, weights, lambda_single=0.01, lambda_pair=0.2)
    ours = {name: p.grad.clone() for name, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = None
    couplings = explicit_couplings(model)
    potts_value, field_grad, coupling_grad = coevolution.pseudo_likelihood(
        model.fields.detach().reshape(-1), couplings.detach(), tokens, weights, lambda_single=0.01, lambda_pair=0.2)
    assert float(value) == pytest.approx(float(potts_value), rel=1e-5)
    torch.testing.assert_close(ours["fields"], field_grad.view(length, states), atol=1e-5, rtol=1e-4)
    couplings.backward(coupling_grad)  # the Potts gradient pulled back through the factored parameters
    for name in ("queries", "keys", "values"):
        torch.testing.assert_close(ours[name], getattr(model, name).grad, atol=1e-5, rtol=1e-4)


def test_attention_is_tied_and_never_attends_to_itself():
    model = FactoredAttention(7, num_heads=2, head_dim=3)
    attention = model.attention()
    assert attention.shape == (2, 7, 7)
    assert torch.all(attention.diagonal(dim1=-2, dim2=-1) == 0)
    torch.testing.assert_close(attention.sum(-1), torch.ones(2, 7))
    assert model.num_parameters() == 2 * 2 * 7 * 3 + 2 * 21 * 21 + 7 * 21


def test_method_attention_never_calls_the_coevolution_code(family, tmp_path, monkeypatch):  # noqa: F811
    def refuse(*args, **kwargs):
        raise AssertionError("--contact-method attention called coevolution code")

    for name in ("potts_couplings", "gaussian_dca", "mutual_information", "pair_frequencies", "mi_apc"):
        monkeypatch.setattr(coevolution, name, refuse)
    for name in ("potts_couplings", "gaussian_dca", "mi_apc", "coevolution_maps"):
        monkeypatch.setattr(msa_features, name, refuse)
    monkeypatch.setattr(msa, "coevolution_maps", refuse)  # msa imported it by name (imported above, before any patch)
    out = tmp_path / "attention"
    assert cli_main(["predict", "msa", "--contact-method", "attention", "--input", str(family["msa"]), "--pdb", str(family["pdb"]),
                     "--out", str(out), "--quick"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert list(metrics["baselines"]) == [FACTORED_ATTENTION_MAP]
    assert ContactHead.load(out / "contact_head.json").features == (FACTORED_ATTENTION_MAP,)
    scores = np.load(out / "contacts.npy")
    assert divmod(int(np.argmax(np.triu(scores, 6))), scores.shape[0]) in ((1, 28), (2, 27))


def test_each_method_ships_a_valid_head_reading_its_maps():
    assert set(SHIPPED_HEADS) == {"attention", "potts", "combined"}
    assert shipped_head("attention").features == (FACTORED_ATTENTION_MAP,)
    assert shipped_head("potts").features == ("potts_apc",)
    assert set(shipped_head("combined").features) <= {FACTORED_ATTENTION_MAP, "potts_apc"}


def synthetic_families(count: int = 4, length: int = 40, seed: int = 0):
    """Families whose native map is random; feature ``good`` is the contact map plus little noise, ``bad`` mostly noise."""
    generator = np.random.default_rng(seed)
    features, distances = {}, {}
    for k in range(count):
        distance = generator.uniform(4.0, 20.0, (length, length))
        distance = np.triu(distance, 1) + np.triu(distance, 1).T
        contact = torch.from_numpy((distance < 8).astype(np.float32))
        name = f"fam{k}"
        features[name] = {"good": contact + 0.3 * torch.randn(length, length),
                          "bad": 0.2 * contact + torch.randn(length, length)}
        distances[name] = distance
    return features, distances


def test_the_selected_head_is_never_below_its_best_single_feature_leave_one_family_out():
    features, distances = synthetic_families()
    head = select_head(features, distances, ["bad", "good"])
    selection = head.settings["selection"]
    assert set(selection) == {"bad", "good", "bad+good"}
    assert selection["+".join(head.features)] == max(selection.values()) >= selection["good"] > selection["bad"]
    for names in (["good"], ["bad"]):
        heads = leave_one_out_heads(features, distances, names)
        mean = np.mean([precision_at(heads[f].probabilities(features[f]).numpy(), distances[f])["P@L/5"] for f in features])
        assert selection["+".join(names)] == pytest.approx(mean)
    with pytest.raises(ValueError, match="two families"):
        select_head({"fam0": features["fam0"]}, distances, ["good"])


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_compare_methods_scores_each_family_with_heads_fitted_on_the_others(tmp_path, capsys):
    write_family_data_root(tmp_path / "data")
    out = tmp_path / "compare"
    assert cli_main(["train", "msa", "--all", "--compare-methods", "--data-root", str(tmp_path / "data"),
                     "--out", str(out), "--quick"]) == 0
    rows = json.loads((out / "summary.json").read_text())["families"]
    assert [row["family"] for row in rows] == ["famA", "famB", "famC"]
    for row in rows:
        assert set(row["maps"]) == {FACTORED_ATTENTION_MAP, "potts_apc", "mi_apc"} and "combined" in row
        attention = row["maps"][FACTORED_ATTENTION_MAP]["P@L/5"]
        assert attention >= max(row["maps"]["potts_apc"]["P@L/5"], 0.5)  # the planted pairs rank high
    assert "| **mean** |" in capsys.readouterr().out
    combined = ContactHead.load(out / "contact_head_combined.json")
    assert combined.fit_on == ("famA", "famB", "famC") and "selection" in combined.settings
    assert ContactHead.load(out / "contact_head_attention.json").features == (FACTORED_ATTENTION_MAP,)
    assert not (out / "famA" / "config.json").exists()  # no axial model


@pytest.mark.slow
def test_method_combined_fits_the_maps_its_head_reads_and_no_axial_model(family, tmp_path):  # noqa: F811
    out = tmp_path / "combined"
    assert cli_main(["predict", "msa", "--contact-method", "combined", "--input", str(family["msa"]), "--pdb", str(family["pdb"]),
                     "--out", str(out), "--quick"]) == 0
    baselines = json.loads((out / "metrics.json").read_text())["baselines"]
    assert set(shipped_head("combined").features) <= set(baselines)
    assert ContactHead.load(out / "contact_head.json") == shipped_head("combined")
    assert not (out / "model.safetensors").exists()


def test_method_and_contact_head_exclude_each_other(family, tmp_path, capsys):  # noqa: F811
    with pytest.raises(SystemExit):
        cli_main(["predict", "msa", "--contact-method", "potts", "--contact-head", str(tmp_path / "h.json"),
                  "--input", str(family["msa"]), "--out", str(tmp_path / "o")])
    assert "not allowed with argument" in capsys.readouterr().err
