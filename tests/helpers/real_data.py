"""The real datasets under the data root, for the tests that read them."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from bioattn.data import resolve_data_root
from bioattn.errors import UserInputError

REQUIRE_DATA_ENV = "BIOATTN_REQUIRE_DATA"


def data_path(*parts: str) -> Path:
    """``DATA_ROOT/part/...``; skips the test when absent, fails it when ``BIOATTN_REQUIRE_DATA=1``."""
    required = os.environ.get(REQUIRE_DATA_ENV, "") not in ("", "0")
    try:
        path = resolve_data_root().joinpath(*parts)
    except UserInputError as exc:
        problem = f"data root not found ({exc})"
    else:
        if path.exists():
            return path
        problem = f"{path} not found under the data root"
    if required:
        pytest.fail(f"{problem}, and {REQUIRE_DATA_ENV}=1 says the real data must be there")
    pytest.skip(problem)
