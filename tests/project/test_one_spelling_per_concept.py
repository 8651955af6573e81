"""One spelling per concept: ``embed_dim`` (width), ``num_heads`` (heads), ``max_len`` (longest input) in every block and
model; old keywords still work for one release with a DeprecationWarning; run directories saved with the old config
keys still load; ``Class.from_pretrained`` returns that class (ensembles load through ``load_pretrained``); every
shipped artefact, contact heads included, lives under ``bioattn/pretrained/``."""
from __future__ import annotations

import inspect
import json
import warnings
from pathlib import Path

import pytest
import torch

from bioattn.attention import (
    LearnedPositionalEncoding,
    MultiHeadAttention,
    SinusoidalPositionalEncoding,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from bioattn.attention.axial import AxialTransformerLayer, ColumnAttention, RowAttention
from bioattn.attention.compat import renamed_arguments, upgrade_config
from bioattn.attention.encoder import FeedForward
from bioattn.errors import UserInputError
from bioattn.models import load_pretrained
from bioattn.models.ensemble import Ensemble
from bioattn.models.hybrid_ct import HybridCT3D
from bioattn.models.msa_contact import MSAContactModel
from bioattn.models.promoter import PromoterClassifier
from bioattn.models.ensemble import ensemble_config
from bioattn.models.registry import PRETRAINED_ROOT
from bioattn.tasks.msa.head import SHIPPED_HEADS, SHIPPED_HEADS_DIR, ContactHead, default_head

BLOCKS_AND_MODELS = (MultiHeadAttention, TransformerEncoderLayer, TransformerEncoder, FeedForward,
                     SinusoidalPositionalEncoding, LearnedPositionalEncoding, RowAttention, ColumnAttention, AxialTransformerLayer,
                     PromoterClassifier, HybridCT3D, MSAContactModel)
#: Spellings that have one replacement each.
OLD_SPELLINGS = {"d_model": "embed_dim", "dim": "embed_dim", "hidden_size": "embed_dim", "width": "embed_dim",
                 "heads": "num_heads", "n_heads": "num_heads", "nhead": "num_heads",
                 "max_length": "max_len", "max_seq_len": "max_len", "max_positions": "max_len"}


@pytest.mark.parametrize("cls", BLOCKS_AND_MODELS, ids=lambda c: c.__name__)
def test_every_block_and_model_spells_width_heads_and_length_one_way(cls: type) -> None:
    parameters = set(inspect.signature(cls.__init__).parameters)
    assert not parameters & set(OLD_SPELLINGS), f"{cls.__name__}: {sorted(parameters & set(OLD_SPELLINGS))}"
    assert "embed_dim" in parameters  # the width of every block and model


@pytest.mark.parametrize("build", [
    lambda **kw: FeedForward(dim_feedforward=8, **kw),
    lambda **kw: TransformerEncoderLayer(num_heads=2, **kw),
    lambda **kw: TransformerEncoder(num_heads=2, num_layers=1, **kw),
    lambda **kw: SinusoidalPositionalEncoding(max_len=8, **kw),
    lambda **kw: LearnedPositionalEncoding(8, **kw),
    lambda **kw: PromoterClassifier(max_len=8, num_heads=2, num_layers=1, **kw),
    lambda **kw: HybridCT3D(stem_channels=(4,), stem_strides=(2,), num_heads=2, num_layers=1, **kw),
], ids=["FeedForward", "TransformerEncoderLayer", "TransformerEncoder", "SinusoidalPositionalEncoding",
        "LearnedPositionalEncoding", "PromoterClassifier", "HybridCT3D"])
def test_the_old_width_keyword_warns_and_builds_the_same_module(build) -> None:
    torch.manual_seed(0)
    new = build(embed_dim=12)
    torch.manual_seed(0)
    with pytest.warns(DeprecationWarning, match=r"\(d_model=\.\.\.\) is deprecated .*use .*\(embed_dim=\.\.\.\)"):
        old = build(d_model=12)
    assert getattr(new, "config", None) == getattr(old, "config", None)
    state_new, state_old = new.state_dict(), old.state_dict()
    assert state_new.keys() == state_old.keys()
    assert all(torch.equal(state_new[k], state_old[k]) for k in state_new)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new spelling is silent
        build(embed_dim=12)


def test_old_and_new_keyword_together_is_an_error() -> None:
    with pytest.raises(TypeError, match="got both d_model= .*and embed_dim="):
        TransformerEncoder(embed_dim=8, d_model=8, num_heads=2, num_layers=1)


def test_a_deprecation_points_at_the_callers_line() -> None:
    with pytest.warns(DeprecationWarning) as record:
        FeedForward(d_model=4, dim_feedforward=8)
    assert record[0].filename == __file__


def test_renamed_arguments_refuses_a_name_mapped_to_itself() -> None:
    with pytest.raises(ValueError, match="new != old"):
        renamed_arguments(embed_dim="embed_dim")


def test_upgrade_config_maps_old_keys_and_refuses_ambiguous_ones() -> None:
    assert upgrade_config({"d_model": 8, "num_heads": 2}, {"d_model": "embed_dim"}) == {"num_heads": 2, "embed_dim": 8}
    with pytest.raises(ValueError, match="run/config.json: holds both 'd_model' and its replacement 'embed_dim'"):
        upgrade_config({"d_model": 8, "embed_dim": 8}, {"d_model": "embed_dim"}, "run/config.json")


def _save_with_old_keys(model, folder: Path) -> None:
    """Save ``model`` as a run directory written before the rename (``d_model`` in config.json)."""
    model.save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    config["d_model"] = config.pop("embed_dim")
    (folder / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize("model", [
    PromoterClassifier(max_len=16, embed_dim=8, num_heads=2, num_layers=1, conv_kernel=3),
    HybridCT3D(stem_channels=(4,), stem_strides=(2,), embed_dim=12, num_heads=2, num_layers=1),
], ids=["PromoterClassifier", "HybridCT3D"])
def test_a_run_directory_saved_with_old_keys_loads_silently_as_the_same_model(model, tmp_path: Path) -> None:
    _save_with_old_keys(model, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a saved file is not the user's code: no warning
        loaded = type(model).from_pretrained(tmp_path)
    assert loaded.config == model.config and "d_model" not in loaded.config
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in model.state_dict().items())
    loaded.save_pretrained(tmp_path / "again")  # saving again writes the new key
    assert json.loads((tmp_path / "again" / "config.json").read_text())["embed_dim"] == model.config["embed_dim"]


def test_a_config_with_both_spellings_is_a_user_error_naming_the_file(tmp_path: Path) -> None:
    PromoterClassifier(max_len=16, embed_dim=8, num_heads=2, num_layers=1).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "d_model": 8}))
    with pytest.raises(UserInputError, match=r"config\.json: holds both 'd_model' and its replacement 'embed_dim'"):
        PromoterClassifier.from_pretrained(tmp_path)


@pytest.fixture
def ensemble_dir(tmp_path: Path) -> Path:
    """An ensemble run directory of two tiny promoter models, the first saved with the old config keys."""
    for seed in (0, 1):
        torch.manual_seed(seed)
        model = PromoterClassifier(max_len=16, embed_dim=8, num_heads=2, num_layers=1, conv_kernel=3)
        (_save_with_old_keys if seed == 0 else type(model).save_pretrained)(model, tmp_path / f"seed{seed}")
    (tmp_path / "config.json").write_text(json.dumps(ensemble_config("PromoterClassifier", ["seed0", "seed1"])))
    return tmp_path


def test_from_pretrained_returns_its_class_and_points_ensembles_to_load_pretrained(ensemble_dir: Path) -> None:
    with pytest.raises(UserInputError, match=r"holds an ensemble of PromoterClassifier, not a single PromoterClassifier; "
                                             r"load it with bioattn\.models\.load_pretrained\(.*seed0, seed1"):
        PromoterClassifier.from_pretrained(ensemble_dir)
    ensemble = load_pretrained(ensemble_dir)
    assert isinstance(ensemble, Ensemble) and len(ensemble.members) == 2 and not ensemble.training
    assert isinstance(load_pretrained(ensemble_dir, expect=PromoterClassifier), Ensemble)
    member = PromoterClassifier.from_pretrained(ensemble_dir / "seed1")
    assert type(member) is PromoterClassifier


def test_load_pretrained_with_expect_refuses_another_class(ensemble_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="holds an ensemble of PromoterClassifier, not a HybridCT3D"):
        load_pretrained(ensemble_dir, expect=HybridCT3D)
    with pytest.raises(UserInputError, match="holds a PromoterClassifier, not a MSAContactModel"):
        load_pretrained(ensemble_dir / "seed1", expect=MSAContactModel)
    assert type(load_pretrained(ensemble_dir / "seed0", expect=PromoterClassifier)) is PromoterClassifier


def test_contact_heads_ship_beside_the_models_and_load() -> None:
    assert SHIPPED_HEADS_DIR.parent == PRETRAINED_ROOT
    for method, path in SHIPPED_HEADS.items():
        assert path.parent == SHIPPED_HEADS_DIR and path.is_file(), method
        ContactHead.load(path)
    assert default_head() == ContactHead.load(SHIPPED_HEADS["potts"])
    # the package-data glob "pretrained/*/*" of pyproject.toml covers them
    pyproject = (PRETRAINED_ROOT.parents[1] / "pyproject.toml").read_text()
    assert '"pretrained/*/*"' in pyproject
    assert not list((PRETRAINED_ROOT.parent / "tasks").glob("*.json"))  # nothing shipped left under tasks/
