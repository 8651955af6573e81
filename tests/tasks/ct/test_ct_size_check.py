"""``bioattn train ct`` checks --size against the CNN stride (each of X, Y and Z a multiple of it) and the stem
flags before it reads any volume, and its help says the rule is per axis."""
from __future__ import annotations

from pathlib import Path

import pytest

from bioattn.cli import main as cli_main
from bioattn.errors import UserInputError
from bioattn.tasks.ct.train import CTOptions


def _missing_manifest(tmp_path: Path) -> Path:
    manifest = tmp_path / "labels.csv"
    manifest.write_text("image,label\nmissing1.nii.gz,a\nmissing2.nii.gz,b\n")
    return manifest


def test_a_size_that_is_not_a_multiple_of_the_stride_fails_before_any_volume_is_read(tmp_path: Path, capsys) -> None:
    code = cli_main(["train", "ct", "--manifest", str(_missing_manifest(tmp_path)), "--out", str(tmp_path / "r"),
                     "--size", "48", "48", "24"])
    err = capsys.readouterr().err
    assert code == 2
    assert "multiple of the CNN stride 16" in err and "Z = 24 is not" in err and "--size 48 48 32" in err
    assert "missing1" not in err  # no file was opened
    assert not (tmp_path / "r").exists()


def test_the_options_refuse_bad_stems_and_sizes_at_construction(tmp_path: Path) -> None:
    manifest = _missing_manifest(tmp_path)
    with pytest.raises(UserInputError, match="multiple of the CNN stride 8"):
        CTOptions(out=tmp_path / "r", manifest=manifest, size=(20, 24, 24))
    CTOptions(out=tmp_path / "r", manifest=manifest, size=(48, 48, 32))  # 16 divides every axis
    with pytest.raises(UserInputError, match="one value per CNN stage"):
        CTOptions(out=tmp_path / "r", manifest=manifest, stem_channels=(8, 16), stem_strides=(2, 2, 2))


def test_the_size_help_states_the_per_axis_rule(capsys) -> None:
    with pytest.raises(SystemExit):
        cli_main(["train", "ct", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "each of X, Y and Z must be a multiple of the CNN stride" in help_text


def test_your_own_volumes_get_the_resnet_stem_and_medmnist_keeps_its_published_layout(tmp_path: Path) -> None:
    """Manifest runs default to the ResNet trunk as the stem with [CLS] + the mean of the CNN tokens (the layout
    that learned small HU lesions its ResNet baseline found); MedMNIST keeps the residual stem and [CLS]; a ResNet
    stem refuses strides it cannot have, before any volume is read."""
    from bioattn.tasks.ct.fit import build_models

    own = CTOptions(out=tmp_path / "r", manifest=_missing_manifest(tmp_path), baseline="none")
    assert (own.stem_name, own.pool_name, own.stem(), own.stride) == ("resnet", "cls+mean", ([8, 16, 32], [2, 2, 2]), 16)
    model, _ = build_models(own, 2, 1)
    assert model.config["stem"] == "resnet" and model.config["pool"] == "cls+mean"
    assert type(model.stem[0]).__name__ == "Conv3d" and model.stem[0].kernel_size == (7, 7, 7)
    medmnist = CTOptions(out=tmp_path / "m")
    assert (medmnist.stem_name, medmnist.pool_name) == ("residual", "cls")
    residual = CTOptions(out=tmp_path / "r", manifest=_missing_manifest(tmp_path), stem_type="residual")
    assert residual.stem() == ([8, 16, 64], [2, 2, 2])
    with pytest.raises(UserInputError, match="--stem resnet: a resnet stem has 1 to 4 stages of stride 2"):
        CTOptions(out=tmp_path / "r", manifest=_missing_manifest(tmp_path), stem_strides=(1, 2, 2))
