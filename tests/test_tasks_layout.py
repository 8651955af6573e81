"""The task layer is three subpackages; release 0.3's flat module names still import for one release, with a warning."""
from __future__ import annotations

import importlib
import sys

import pytest

from bioattn.tasks import MOVED_MODULES


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_old_module_name_warns_and_is_the_new_module(old: str) -> None:
    sys.modules.pop(f"bioattn.tasks.{old}", None)
    new = importlib.import_module(f"bioattn.tasks.{MOVED_MODULES[old]}")
    with pytest.warns(DeprecationWarning, match=f"bioattn.tasks.{MOVED_MODULES[old]}"):
        moved = importlib.import_module(f"bioattn.tasks.{old}")
    assert moved is new


def test_from_import_of_an_old_name() -> None:
    sys.modules.pop("bioattn.tasks.msa_head", None)
    with pytest.warns(DeprecationWarning):
        from bioattn.tasks.msa_head import ContactHead
    from bioattn.tasks.msa.head import ContactHead as new
    assert ContactHead is new


@pytest.mark.parametrize("package, names", [
    ("promoter", ["PromoterOptions", "run_promoter", "build_model"]),
    ("ct", ["CTOptions", "train_ct", "PROTOCOLS"]),
    ("msa", ["train_families", "train_family", "DEFAULTS"]),
])
def test_task_package_reexports_its_train_module(package: str, names: list[str]) -> None:
    pkg = importlib.import_module(f"bioattn.tasks.{package}")
    train = importlib.import_module(f"bioattn.tasks.{package}.train")
    for name in names:
        assert getattr(pkg, name) is getattr(train, name)
    with pytest.raises(AttributeError, match="no attribute"):
        getattr(pkg, "no_such_name")


def test_unknown_old_name_is_not_invented() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("bioattn.tasks.no_such_module")


def test_task_options_share_one_base(tmp_path) -> None:
    import dataclasses

    from bioattn.errors import UserInputError
    from bioattn.tasks.common import TaskOptions
    from bioattn.tasks.ct import CTOptions
    from bioattn.tasks.promoter import PromoterOptions

    shared = {f.name for f in dataclasses.fields(TaskOptions)}
    assert shared == {"out", "data_root", "quick", "seeds", "cv", "cv_repeats", "resume", "overwrite",
                      "embed_dim", "heads", "layers", "dropout"}
    for options_class in (PromoterOptions, CTOptions):
        assert issubclass(options_class, TaskOptions)
        with pytest.raises(UserInputError, match="not both"):  # the shared checks run in every task
            options_class(out=tmp_path, seeds=(1,), cv=3)


def test_ct_options_train_config_and_the_old_name(tmp_path) -> None:
    from bioattn.tasks.ct import CTOptions, protocol_train_config

    config = protocol_train_config("tuned", quick=True)
    options = CTOptions(out=tmp_path, train_config=config)
    assert options.train_config is config
    with pytest.warns(DeprecationWarning, match="train_config"):
        old = CTOptions(out=tmp_path, train=config)
    assert old == options
    with pytest.warns(DeprecationWarning, match="train_config"):
        assert old.train is config
    with pytest.raises(TypeError, match="both"):
        CTOptions(out=tmp_path, train=config, train_config=config)
