"""Code the tests share that is neither a test nor a fixture (fixtures: ``tests/conftest.py``).

``REPO_ROOT`` is the checkout the tests belong to: tests find the package, the docs, the recipes, the benchmarks and
the notebooks from it instead of counting parent folders of their own file.
"""
from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
TEST_DATA = REPO_ROOT / "tests" / "data"
