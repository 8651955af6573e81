"""The contact head schema (contact_head.json): round trip, validation, feature matching, leave-one-family-out fits."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from bioattn.errors import UserInputError
from bioattn.models.msa_contact import logistic_contact_probabilities
from bioattn.tasks.msa.head import (
    ContactHead, attention_feature_names, default_head, feature_names, fit_head, leave_one_out_heads,
)


def head_over(names, fit_on=("famA",)) -> ContactHead:
    return ContactHead(tuple(names), tuple(0.1 * (k + 1) for k in range(len(names))), -2.0, tuple(fit_on), {"seed": 0})


def test_round_trip_keeps_every_field(tmp_path):
    head = head_over(feature_names(2, 2, ["potts_apc"]), fit_on=("famA", "famB"))
    head.save(tmp_path / "contact_head.json")
    loaded = ContactHead.load(tmp_path / "contact_head.json")
    assert loaded == head
    assert loaded.attention_shape() == (2, 2) and loaded.coevolution_features == ("potts_apc",)
    assert set(json.loads((tmp_path / "contact_head.json").read_text())) == {"features", "weight", "bias", "fit_on", "settings"}


def test_a_head_written_before_settings_existed_still_loads(tmp_path):
    (tmp_path / "head.json").write_text(json.dumps({"features": ["mi_apc"], "weight": [1.5], "bias": 0.5, "fit_on": ["x"]}))
    head = ContactHead.load(tmp_path / "head.json")
    assert head.settings == {} and head.coevolution == "gaussian"


@pytest.mark.parametrize("content, message", [
    ("not json", r"head\.json: not a readable contact_head\.json"),
    ("[1, 2]", r"head\.json: expected a JSON object"),
    ('{"features": ["potts_apc"], "weight": [1.0]}', r"head\.json: not a contact_head\.json \(missing bias\)"),
    ('{"features": ["potts_apc"], "weight": [1.0], "bias": 0, "colour": 1}', r"unknown key 'colour'"),
    ('{"features": ["potts_apc"], "weight": [1.0, 2.0], "bias": 0}', r"head\.json: 2 weights for 1 features"),
    ('{"features": ["potts_apc"], "weight": ["x"], "bias": 0}', r"head\.json: 'weight' and 'bias' must be finite numbers"),
    ('{"features": ["psicov"], "weight": [1.0], "bias": 0}', r"head\.json: unknown feature 'psicov'"),
    ('{"features": ["layer0_head_rank1"], "weight": [1.0], "bias": 0}', r"every layer<l>_head_rank<k> of a 1-layer, 2-head model"),
    ('{"features": ["potts_apc", "mi_apc"], "weight": [1.0, 1.0], "bias": 0}', r"no --coevolution computes the maps potts_apc, mi_apc"),
])
def test_malformed_head_files_name_the_file_and_the_problem(tmp_path, content, message):
    (tmp_path / "head.json").write_text(content)
    with pytest.raises(UserInputError, match=message):
        ContactHead.load(tmp_path / "head.json")


def test_missing_head_file(tmp_path):
    with pytest.raises(UserInputError, match=r"absent\.json: contact head file not found"):
        ContactHead.load(tmp_path / "absent.json")


def test_a_head_of_another_model_is_refused_with_the_flags_to_use():
    head = head_over(feature_names(4, 4, ["potts_apc"]))
    with pytest.raises(UserInputError, match=r"head\.json: fitted on other features than this model's .*"
                                             r"use --layers 4 --heads 4 --coevolution potts"):
        head.require(feature_names(2, 2, ["potts_apc"]), "head.json", "this model's")
    # rank 1 of a 2-head model is not rank 1 of a 4-head model: a smaller grid is refused too
    smaller = head_over(feature_names(2, 2, []))
    with pytest.raises(UserInputError, match=r"use --layers 2 --heads 2 --coevolution none"):
        smaller.require(feature_names(4, 4, []), "head.json", "this model's")


def test_a_head_reads_a_subset_of_the_features_with_zero_weight_elsewhere():
    head = head_over(["potts_apc"])
    names = feature_names(2, 2, ["potts_apc"])
    head.require(names, "head.json", "this model's")  # no error: the attention features get weight 0
    weights = head.weights_for(names)
    assert weights.tolist() == pytest.approx([0, 0, 0, 0, 0.1])
    generator = torch.Generator().manual_seed(0)
    features = {name: torch.rand(20, 20, generator=generator) for name in names}
    stacked = torch.stack([features[n] for n in names], dim=-1)
    torch.testing.assert_close(head.probabilities(features), logistic_contact_probabilities(stacked, torch.tensor(weights), -2.0))


def test_the_shipped_default_head_reads_the_potts_map_only():
    head = default_head()
    assert head.features == ("potts_apc",) and head.weight[0] > 0
    assert len(head.fit_on) >= 3 and head.settings["coevolution"] == "potts"


def _family(generator: np.random.Generator, length: int) -> tuple[dict[str, torch.Tensor], np.ndarray]:
    distances = generator.uniform(3, 20, (length, length))
    distances = (distances + distances.T) / 2
    features = {name: torch.rand(length, length) for name in attention_feature_names(1, 2)}
    features["mi_apc"] = torch.tensor(-distances, dtype=torch.float32)
    return features, distances


def test_leave_one_family_out_never_fits_on_the_evaluated_family():
    generator = np.random.default_rng(1)
    families = {name: _family(generator, 30 + k) for k, name in enumerate(["famA", "famB", "famC"])}
    names = feature_names(1, 2, ["mi_apc"])
    heads = leave_one_out_heads({n: f for n, (f, _) in families.items()}, {n: d for n, (_, d) in families.items()}, names)
    for name, head in heads.items():
        assert name not in head.fit_on and len(head.fit_on) == 2
        assert head.features == tuple(names) and head.weight[-1] > 0  # -distance predicts contacts
    everything = fit_head({n: f for n, (f, _) in families.items()}, {n: d for n, (_, d) in families.items()}, names, {"seed": 3})
    assert everything.fit_on == ("famA", "famB", "famC") and everything.settings == {"seed": 3}
