"""Per-task defaults: one mechanism (:class:`bioattn.tasks.common.Recipe`) for the promoter, CT and MSA tasks, and
the defaults every task resolves to pinned (``tests/data/task_defaults.json``, captured before the recipes were
unified), so that moving them cannot move a number. Options share one base with the model size."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bioattn.errors import UserInputError
from bioattn.tasks.common import Recipe, TaskOptions, recipe_for
from bioattn.tasks.ct.train import PROTOCOLS, CTOptions, protocol_train_config
from bioattn.tasks.msa.features import RECIPE as MSA_RECIPE
from bioattn.tasks.msa.pretrain import PRETRAIN_RECIPE
from bioattn.tasks.promoter.train import TASK_RECIPES, TASKS, PromoterOptions, default_config, task_recipe
from tests.helpers import TEST_DATA

EXPECTED = json.loads((TEST_DATA / "task_defaults.json").read_text())


def _json(value):
    return json.loads(json.dumps(value, default=str))


@pytest.mark.parametrize("task", [*TASKS, None])
def test_promoter_defaults_resolve_as_before(task) -> None:
    recipe = task_recipe(task)
    expected = EXPECTED[f"promoter:{task}"]
    fields = {f.name: getattr(recipe, f.name) for f in dataclasses.fields(recipe) if f.name not in ("train_config", "description")}
    assert fields == expected["recipe"]
    assert _json(default_config(task, 0).to_dict()) == expected["scratch"]
    assert _json(default_config(task, recipe.pretrain_epochs or 4).to_dict()) == expected["after_pretraining"]


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_ct_protocols_resolve_as_before(name: str) -> None:
    protocol, expected = PROTOCOLS[name], EXPECTED[f"ct:{name}"]
    assert _json(protocol.train_config.to_dict()) == expected["train"]
    assert {k: getattr(protocol, k) for k in ("label_smoothing", "intensity_jitter", "flip_tta", "mixup")} == {
        k: v for k, v in expected.items() if k != "train"}
    assert protocol_train_config(name).max_epochs == protocol.train_config.max_epochs


def test_msa_recipes_resolve_as_before() -> None:
    assert _json(MSA_RECIPE.train_config.to_dict()) == EXPECTED["msa:contacts"]
    assert _json(PRETRAIN_RECIPE.train_config.to_dict()) == EXPECTED["msa:pretrain"]


def test_every_task_declares_its_defaults_as_recipes() -> None:
    for recipe in (*TASK_RECIPES.values(), *PROTOCOLS.values(), MSA_RECIPE, PRETRAIN_RECIPE):
        assert isinstance(recipe, Recipe) and recipe.description
    assert set(TASK_RECIPES) == {*TASKS, None}  # every bundled task and your own files


def test_an_unknown_name_is_one_clear_error_and_own_files_fall_back() -> None:
    with pytest.raises(UserInputError, match=r"unknown --protocol 'fast'; choose one of medmnist, tuned"):
        recipe_for(PROTOCOLS, "fast", flag="--protocol")
    assert task_recipe("my_own_task") is TASK_RECIPES[None]


def test_options_share_one_base_with_the_model_size(tmp_path: Path) -> None:
    for cls, width, layers in ((PromoterOptions, 64, 2), (CTOptions, 96, 3)):
        options = cls(out=tmp_path)
        assert isinstance(options, TaskOptions)
        assert (options.embed_dim, options.heads, options.layers) == (width, 4, layers)
        with pytest.raises(TypeError):  # the 0.3 spelling d_model= is gone from the task options
            cls(out=tmp_path, d_model=48)
        assert not hasattr(options, "d_model")
        assert cls(out=tmp_path, embed_dim=48).embed_dim == 48


def test_msa_options_are_task_options_without_cross_validation() -> None:
    from bioattn.tasks.msa.features import MSAOptions
    from bioattn.tasks.msa.pretrain import PretrainOptions

    for cls in (MSAOptions, PretrainOptions):
        options = cls()
        assert isinstance(options, TaskOptions) and (options.embed_dim, options.heads, options.layers) == (64, 4, 4)
        with pytest.raises(UserInputError, match="has no --cv"):
            cls(cv=5)
        quick = options.quick_sizes()
        assert quick.quick and quick.embed_dim < options.embed_dim
        recorded = options.settings()  # what contact_head.json / the pretraining run record: no run options
        assert not {"out", "data_root", "quick", "cv", "resume", "overwrite"} & set(recorded) and "embed_dim" in recorded
    assert MSAOptions(seeds=(0, 1)).settings()["seeds"] == (0, 1)
    with pytest.raises(UserInputError, match="pretrain msa trains one model"):
        PretrainOptions(seeds=(0, 1))
