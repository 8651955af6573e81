"""``bioattn models`` reads the shipped cards without importing torch or any model."""
from __future__ import annotations

import os
import subprocess
import sys

from bioattn.models import ensemble, registry
from tests.helpers import REPO_ROOT

_LIST = """
import sys
from bioattn.cli import main
assert main(["models"]) == 0
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "monai") or m.startswith("bioattn.models.")
               and m != "bioattn.models.registry")
print("IMPORTED", heavy)
"""


def test_listing_the_models_imports_neither_torch_nor_a_model() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-c", _LIST], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip().splitlines()[-1] == "IMPORTED []", done.stdout
    for name in registry.available_models():  # and it still lists every shipped model with its card
        assert f"| {name} |" in done.stdout
    assert "ESM-MSA-1b weights are not shipped" in done.stdout


def test_the_registry_names_ensembles_as_the_ensemble_module_does() -> None:
    assert registry.ENSEMBLE_TYPE == ensemble.ENSEMBLE_TYPE
