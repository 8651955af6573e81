"""Shared test fixtures.

Tests that read the real datasets ask for them through :func:`require_data`: without a data root they skip,
unless ``BIOATTN_REQUIRE_DATA=1`` (set by ``.ci/run``), in which case a missing dataset fails the test instead
of skipping it silently.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import numpy as np
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


@pytest.fixture(autouse=True)
def fresh_emulated_bf16_warning():
    """The emulated-bf16 warning prints once per process; each test starts as a new process would."""
    from bioattn import precision

    precision._warn_emulated_bf16.cache_clear()


@pytest.fixture
def require_data() -> Callable[..., Path]:
    """The :func:`data_path` function, as a fixture."""
    return data_path


def write_tiny_adrenalmnist3d(data_root: Path) -> Path:
    """``DATA_ROOT/ct/adrenalmnist3d/adrenalmnist3d_64_trainval.npz`` (the default size) with 16 train and 8 val
    random binary 64³ masks (labels alternate); returns the file."""
    rng = np.random.default_rng(0)
    folder = data_root / "ct" / "adrenalmnist3d"
    folder.mkdir(parents=True)
    arrays = {}
    for split, n in (("train", 16), ("val", 8)):
        arrays[f"{split}_images"] = (rng.random((n, 64, 64, 64)) > 0.5).astype(np.uint8) * 255
        arrays[f"{split}_labels"] = (np.arange(n) % 2)[:, None].astype(np.uint8)
    np.savez(folder / "adrenalmnist3d_64_trainval.npz", **arrays)
    return folder / "adrenalmnist3d_64_trainval.npz"
