"""One spelling per concept: ``embed_dim`` (width), ``num_heads`` (heads), ``max_len`` (longest input) in every block and
model (the old keywords and config keys, accepted until 0.5.0, are errors now); ``Class.from_pretrained`` returns that class (ensembles load through ``load_pretrained``); every
shipped artefact, contact heads included, lives under ``bioattn/pretrained/``."""
from __future__ import annotations

import inspect
import json
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
    lambda **kw: TransformerEncoder(num_heads=2, num_layers=1, **kw),
    lambda **kw: SinusoidalPositionalEncoding(max_len=8, **kw),
    lambda **kw: PromoterClassifier(max_len=8, num_heads=2, num_layers=1, **kw),
    lambda **kw: HybridCT3D(stem_channels=(4,), stem_strides=(2,), num_heads=2, num_layers=1, **kw),
], ids=["FeedForward", "TransformerEncoder", "SinusoidalPositionalEncoding", "PromoterClassifier", "HybridCT3D"])
def test_the_old_width_keyword_is_gone(build) -> None:
    with pytest.raises(TypeError, match="d_model"):  # removed in 0.5.0: Python's usual error
        build(d_model=12)


def test_a_run_directory_saved_with_the_old_width_key_is_a_user_error_naming_the_file(tmp_path: Path) -> None:
    PromoterClassifier(max_len=16, embed_dim=8, num_heads=2, num_layers=1).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["d_model"] = config.pop("embed_dim")
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserInputError, match=r"config\.json: does not fit PromoterClassifier .*d_model.*names it embed_dim"):
        PromoterClassifier.from_pretrained(tmp_path)


def test_every_shipped_config_uses_todays_keys() -> None:
    for path in PRETRAINED_ROOT.rglob("config.json"):
        assert not set(json.loads(path.read_text())) & set(OLD_SPELLINGS), path


@pytest.fixture
def ensemble_dir(tmp_path: Path) -> Path:
    """An ensemble run directory of two tiny promoter models."""
    for seed in (0, 1):
        torch.manual_seed(seed)
        model = PromoterClassifier(max_len=16, embed_dim=8, num_heads=2, num_layers=1, conv_kernel=3)
        model.save_pretrained(tmp_path / f"seed{seed}")
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
