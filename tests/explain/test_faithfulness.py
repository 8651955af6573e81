"""Attribution methods, faithfulness curves, head sharpness and the per-head temperature, on hand-checkable cases.

The toy promoter model sees 12-nt sequences whose label is "position 5 is an A" and nothing else, so a faithful
map ranks position 5 first and deleting it first destroys the prediction."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from bioattn.attention import MultiHeadAttention
from bioattn.cli import main as cli_main
from bioattn.data.dna import A_ID, C_ID, T_ID, decode
from bioattn.explain.attribution import METHODS
from bioattn.explain.faithfulness import area_under_curve, deletion_insertion, evaluate_faithfulness, rank_units
from bioattn.explain.relevance import relevance_from_attention
from bioattn.explain.result import resolve_method
from bioattn.explain.sharpness import head_sharpness
from bioattn.models.promoter import PromoterClassifier
from bioattn.tasks.ct.methods import CT_METHODS
from bioattn.tasks.explain_dispatch import attribute
from bioattn.tasks.promoter.attribution import PROMOTER_METHODS, promoter_attribution, promoter_score

KEY, LENGTH = 5, 12


def _batch(n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(A_ID, T_ID + 1, (n, LENGTH), generator=generator)
    labels = torch.rand(n, generator=generator) < 0.5
    other = torch.randint(C_ID, T_ID + 1, (n,), generator=generator)
    ids[:, KEY] = torch.where(labels, torch.full_like(other, A_ID), other)
    return ids, labels.float()


@pytest.fixture(scope="module")
def key_model() -> PromoterClassifier:
    """A one-layer promoter model trained until it reads position 5 perfectly."""
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    model = PromoterClassifier(max_len=LENGTH, embed_dim=16, num_heads=2, num_layers=1, conv_kernel=0, rc_average=False)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(120):
        ids, labels = _batch(64, generator)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(ids), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    ids, labels = _batch(200, generator)
    assert ((model(ids) > 0).float() == labels).float().mean() > 0.98, "the toy model must have learned position 5"
    return model


@pytest.fixture(scope="module")
def key_inputs() -> torch.Tensor:
    return _batch(60, torch.Generator().manual_seed(1))[0]


def _first_rank_rate(model: PromoterClassifier, ids: torch.Tensor, method: str) -> float:
    attribution = promoter_attribution(model, ids, torch.zeros_like(ids, dtype=torch.bool), method)
    return float((attribution.argmax(dim=1) == KEY).float().mean())


@pytest.mark.parametrize("method, rate", [("integrated_gradients", 0.95), ("rollout", 0.95), ("gradient_x_input", 0.7),
                                          ("relevance", 0.3)])
@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_each_method_ranks_the_only_informative_position_first(key_model, key_inputs, method, rate) -> None:
    random_rate = _first_rank_rate(key_model, key_inputs, "random")
    assert random_rate < 0.25, "a random map ranks position 5 first about 1 time in 12"
    measured = _first_rank_rate(key_model, key_inputs, method)
    assert measured >= rate and measured > random_rate + 0.2


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_faithful_map_beats_random_on_deletion_and_insertion(key_model, key_inputs) -> None:
    padding = torch.zeros_like(key_inputs, dtype=torch.bool)
    classes = (key_model(key_inputs) > 0).long()
    scores = [promoter_score(key_model, ids, int(c)) for ids, c in zip(key_inputs, classes)]
    results = {method: evaluate_faithfulness(method, scores, list(promoter_attribution(key_model, key_inputs, padding, method)),
                                             steps=LENGTH).summary() for method in ("integrated_gradients", "random")}
    assert results["integrated_gradients"]["deletion_auc"] < results["random"]["deletion_auc"] - 0.1
    assert results["integrated_gradients"]["insertion_auc"] > results["random"]["insertion_auc"] + 0.1


def test_deletion_curve_of_a_perfect_ranking_is_hand_computable() -> None:
    # A score that is 1 while unit 3 is intact and 0.5 once it is perturbed; 4 units, 4 steps.
    def score(masks: torch.Tensor) -> torch.Tensor:
        return torch.where(masks[:, 3], 0.5, 1.0).double()

    fractions, deletion, insertion = deletion_insertion(score, torch.tensor([0.1, 0.2, 0.0, 9.0]), steps=4)
    np.testing.assert_allclose(deletion, [1, 0.5, 0.5, 0.5, 0.5])
    np.testing.assert_allclose(insertion, [0.5, 1, 1, 1, 1])
    assert area_under_curve(deletion, fractions) == pytest.approx(0.5625)  # (1 + 0.5)/2/4 + 3 * 0.5/4
    assert area_under_curve(insertion, fractions) == pytest.approx(0.9375)


def test_ties_are_broken_at_random_so_a_constant_map_is_no_better_than_random() -> None:
    generator = torch.Generator().manual_seed(0)
    firsts = [int(rank_units(torch.zeros(10), generator)[0]) for _ in range(200)]
    assert len(set(firsts)) == 10


def test_relevance_rule_on_one_layer_by_hand() -> None:
    attention = torch.tensor([[[[0.5, 0.5], [0.0, 1.0]], [[1.0, 0.0], [0.5, 0.5]]]])  # (1, 2 heads, 2, 2)
    gradient = torch.tensor([[[[2.0, -1.0], [1.0, 1.0]], [[1.0, 3.0], [-4.0, 2.0]]]])
    # mean over heads of (grad * A)+ : head 0 [[1, 0], [0, 1]], head 1 [[1, 0], [0, 1]] -> [[1, 0], [0, 1]]; R = I + Ā
    relevance = relevance_from_attention([attention], [gradient])
    torch.testing.assert_close(relevance[0], torch.tensor([[2.0, 0.0], [0.0, 2.0]]))
    # two layers: R = (I + Ā2)(I + Ā1)
    two = relevance_from_attention([attention, attention], [gradient, gradient])
    torch.testing.assert_close(two[0], torch.tensor([[4.0, 0.0], [0.0, 4.0]]))


def test_sharpness_of_uniform_and_known_temperature_heads() -> None:
    keys = 8
    uniform = torch.full((1, 1, 3, keys), 1.0 / keys)
    scores = torch.linspace(-1, 1, keys)
    scores = (scores - scores.mean()) / scores.std()  # sd 1
    sharp = torch.softmax(scores * 4.0, dim=-1).expand(1, 1, 3, keys)  # temperature 1/4
    result = head_sharpness([torch.cat([uniform, sharp], dim=1)])
    assert result["normalised_entropy"][0, 0] == pytest.approx(1.0)
    assert result["entropy"][0, 0] == pytest.approx(np.log(keys))
    assert result["temperature"][0, 1] == pytest.approx(0.25, rel=1e-6)
    assert result["normalised_entropy"][0, 1] < 0.6


def test_sharpness_leaves_out_padding() -> None:
    weights = torch.tensor([[0.5, 0.5, 0.0]]).expand(1, 1, 3, 3).clone()
    padding = torch.tensor([[False, False, True]])
    assert head_sharpness([weights], padding)["normalised_entropy"][0, 0] == pytest.approx(1.0)


def test_head_temperature_is_the_identity_at_init_and_costs_one_parameter_per_head() -> None:
    torch.manual_seed(0)
    plain = MultiHeadAttention(16, 4)
    tempered = MultiHeadAttention(16, 4, head_temperature=True)
    tempered.load_state_dict(plain.state_dict(), strict=False)
    assert sum(p.numel() for p in tempered.parameters()) == sum(p.numel() for p in plain.parameters()) + 4
    x = torch.randn(2, 5, 16)
    out, weights = tempered(x, need_weights=True)
    reference, reference_weights = plain(x, need_weights=True)
    torch.testing.assert_close(out, reference, rtol=0, atol=0)
    torch.testing.assert_close(weights, reference_weights, rtol=0, atol=0)
    with torch.no_grad():
        tempered.log_head_scale.fill_(np.log(3.0))  # scores x3: sharper
    _, sharper = tempered(x, need_weights=True)
    assert (head_sharpness([sharper])["temperature"] < head_sharpness([reference_weights])["temperature"]).all()


@pytest.mark.slow
def test_explain_promoter_writes_faithfulness_of_every_method(tmp_path: Path, key_model, key_inputs, capsys) -> None:
    key_model.save_pretrained(tmp_path / "run")
    fasta = tmp_path / "in.fa"
    fasta.write_text("".join(f">s{i}\n{decode(ids)}\n" for i, ids in enumerate(key_inputs[:12])))
    out = tmp_path / "out"
    assert cli_main(["explain", "promoter", "--model", str(tmp_path / "run"), "--input", str(fasta), "--out", str(out),
                     "--motif", "", "--plot-sequences", "0", "--faithfulness-steps", "12"]) == 0
    assert "explain: method integrated_gradients" in capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "integrated_gradients" and set(summary["faithfulness"]) == set(PROMOTER_METHODS)
    for result in summary["faithfulness"].values():
        assert {"deletion_auc", "insertion_auc", "seconds"} <= set(result) and result["examples"] == 12
    assert summary["faithfulness"]["integrated_gradients"]["deletion_auc"] < summary["faithfulness"]["random"]["deletion_auc"]
    assert (out / "faithfulness.png").stat().st_size > 0 and (out / "head_sharpness.png").stat().st_size > 0
    rows = [line.split("\t") for line in (out / "influence.tsv").read_text().splitlines()[1:]]
    by_sequence = np.array([float(r[4]) for r in rows]).reshape(12, LENGTH)
    assert (by_sequence.argmax(1) == KEY).mean() > 0.9

    chosen = tmp_path / "chosen"
    assert cli_main(["explain", "promoter", "--model", str(tmp_path / "run"), "--input", str(fasta), "--out", str(chosen),
                     "--motif", "", "--plot-sequences", "0", "--method", "relevance", "--no-faithfulness"]) == 0
    summary = json.loads((chosen / "summary.json").read_text())
    assert summary["method"] == "relevance" and "faithfulness" not in summary
    assert "explain: method" not in capsys.readouterr().err


def test_auto_method_is_chosen_on_a_warm_probe_not_the_first_cold_one(capsys) -> None:
    """On a GPU the first gradient pass pays for the context and kernel selection: estimating from it made
    ``--method auto`` drop Integrated Gradients there. The estimate is the second pass."""
    passes = iter([1000.0, 0.01])  # seconds: cold first pass, warm second pass
    assert resolve_method("auto", ("integrated_gradients", "rollout"), lambda: next(passes)) == "integrated_gradients"
    assert "explain: method integrated_gradients" in capsys.readouterr().err
    slow = iter([1000.0, 1000.0])
    assert resolve_method("auto", ("integrated_gradients", "rollout"), lambda: next(slow)) == "rollout"


class _OneVoxel(torch.nn.Module):
    """Two-class 'CT model' whose logits read one voxel only."""

    def __init__(self, voxel: tuple[int, int, int]) -> None:
        super().__init__()
        self.voxel = voxel
        self.weight = torch.nn.Parameter(torch.tensor(3.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        value = x[:, 0, self.voxel[0], self.voxel[1], self.voxel[2]] * self.weight
        return torch.stack([-value, value], dim=1)


@pytest.mark.parametrize("method", ["integrated_gradients", "gradient_x_input"])
def test_voxel_attribution_finds_the_voxel_the_model_reads(method: str) -> None:
    from bioattn.tasks.ct.attribution import volume_attribution, volume_score

    model = _OneVoxel((2, 3, 1)).eval()
    volumes = torch.rand(3, 1, 4, 5, 6, generator=torch.Generator().manual_seed(0)) + 0.5
    attribution = volume_attribution(model, volumes, method)
    assert attribution.shape == (3, 4, 5, 6)
    assert all(np.unravel_index(int(a.argmax()), a.shape) == (2, 3, 1) for a in attribution)
    # Integrated Gradients is complete: the attributions add up to f(x) - f(background) in log-odds
    if method == "integrated_gradients":
        expected = 2 * 3.0 * (volumes[:, 0, 2, 3, 1] - volumes.flatten(1).amin(1))
        torch.testing.assert_close(attribution.sum((1, 2, 3)), expected, rtol=1e-3, atol=1e-3)
    result = evaluate_faithfulness(method, [volume_score(model, volumes[0], 1)], [attribution[0].flatten()], steps=10)
    assert result.deletion[1] < 1  # the first 10 % deleted hold the voxel


@pytest.mark.slow
def test_msa_column_attribution_and_command_faithfulness(tmp_path: Path) -> None:
    from bioattn.data.msa import MSATokenizer
    from bioattn.tasks.msa.attribution import msa_attribution, msa_score, predicted_residues
    from bioattn.models.msa_contact import MSAContactModel

    torch.manual_seed(0)
    model = MSAContactModel(max_len=20, embed_dim=16, num_heads=2, num_layers=2, dropout=0.0).eval()
    rows = ["ACDEFGHIKLMNPQRSTVWY"[i:] + "ACDEFGHIKLMNPQRSTVWY"[:i] for i in range(6)]
    tokens = MSATokenizer().encode(rows)
    residues = predicted_residues(model, tokens)
    maps = {method: msa_attribution(model, tokens, method, residues=residues) for method in METHODS}
    assert all(m.shape == (20,) and torch.isfinite(m).all() for m in maps.values())
    torch.testing.assert_close(attribute(model, tokens, "relevance"), maps["relevance"])  # the one entry point
    # rollout: each query column's flow sums to 1, so the column shares add up to the 20 query columns
    assert float(maps["rollout"].sum()) == pytest.approx(20.0, rel=1e-5)
    score = msa_score(model, tokens, residues)
    full = score(torch.zeros(1, 20, dtype=torch.bool))
    assert 0 < float(full) <= 1 and float(score(torch.ones(1, 20, dtype=torch.bool))) != pytest.approx(float(full))

    model.save_pretrained(tmp_path / "run")
    alignment = tmp_path / "family.fasta"
    alignment.write_text("".join(f">r{i}\n{row}\n" for i, row in enumerate(rows)))
    assert cli_main(["explain", "msa", "--model", str(tmp_path / "run"), "--input", str(alignment), "--out",
                     str(tmp_path / "out"), "--method", "rollout", "--faithfulness-steps", "5"]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["method"] == "rollout" and set(summary["faithfulness"]) == set(METHODS)
    assert len(summary["head_sharpness"]["temperature"]) == 2
    assert len((tmp_path / "out" / "columns.tsv").read_text().splitlines()) == 21


@pytest.mark.slow
def test_explain_ct_command_writes_attribution_and_faithfulness(tmp_path: Path) -> None:
    from tests.helpers.ct_volumes import write_tiny_ct_run

    write_tiny_ct_run(tmp_path)
    out = tmp_path / "out"
    assert cli_main(["explain", "ct", "--model", str(tmp_path / "run"), "--input", str(tmp_path / "vols.npz"),
                     "--out", str(out), "--method", "relevance", "--faithfulness-steps", "4",
                     "--faithfulness-methods", "all"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "relevance" and set(summary["faithfulness"]) == set(CT_METHODS)
    for name in ("rollout.nii.gz", "attribution.nii.gz", "faithfulness.png", "head_sharpness.png"):
        assert (out / name).stat().st_size > 0
