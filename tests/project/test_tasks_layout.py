"""The task layer is one subpackage per task; nothing re-exports or redirects module names."""
from __future__ import annotations

import ast
import importlib

import pytest

from tests.helpers import REPO_ROOT


def test_no_import_machinery_and_no_module_getattr() -> None:
    """Release 0.4 dropped the finder for release 0.3's flat module names and the module-level ``__getattr__``
    re-exports: every name is imported from the module that defines it."""
    package = REPO_ROOT / "bioattn"
    offenders = []
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text())
        text = path.read_text()
        if "MetaPathFinder" in text or any(isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
                                            for node in tree.body):
            offenders.append(str(path.relative_to(package)))
        if any(isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__getattr__" for t in node.targets)
               for node in tree.body):
            offenders.append(str(path.relative_to(package)))
    assert not offenders


def test_old_flat_module_names_are_gone() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("bioattn.tasks.msa_head")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("bioattn.tasks.no_such_module")


def test_task_options_share_one_base(tmp_path) -> None:
    import dataclasses

    from bioattn.errors import UserInputError
    from bioattn.tasks.common import TaskOptions
    from bioattn.tasks.ct.train import CTOptions
    from bioattn.tasks.promoter.train import PromoterOptions

    shared = {f.name for f in dataclasses.fields(TaskOptions)}
    assert shared == {"out", "data_root", "quick", "seeds", "cv", "cv_repeats", "resume", "overwrite",
                      "embed_dim", "heads", "layers", "dropout"}
    for options_class in (PromoterOptions, CTOptions):
        assert issubclass(options_class, TaskOptions)
        with pytest.raises(UserInputError, match="not both"):  # the shared checks run in every task
            options_class(out=tmp_path, seeds=(1,), cv=3)


def test_ct_options_train_config(tmp_path) -> None:
    from bioattn.tasks.ct.train import CTOptions, protocol_train_config

    config = protocol_train_config("tuned", quick=True)
    assert CTOptions(out=tmp_path, train_config=config).train_config is config
    with pytest.raises(TypeError):  # the 0.3 spelling is gone
        CTOptions(out=tmp_path, train=config)
