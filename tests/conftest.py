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


def write_fasta(path: Path, records: dict[str, str], width: int = 60) -> Path:
    """Write ``records`` (name -> sequence) as FASTA, ``width`` letters a line and a description after each name;
    returns ``path``."""
    lines = []
    for name, sequence in records.items():
        lines.append(f">{name} assembled test sequence")
        lines += [sequence[i : i + width] for i in range(0, len(sequence), width)]
    path.write_text("\n".join(lines) + "\n")
    return path


# ------------------------------------------------------------------ shared inputs and trained runs (once per session)
# Each trained run below is made once per test session and shared by every module that asks for it, instead of each
# module training its own; tests read these folders and write their own outputs under their own tmp_path.
@pytest.fixture(scope="session")
def family(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny planted alignment (``msa``, 30 columns) and a hairpin structure of its query (``pdb``)."""
    from test_msa_cli import query_of, write_alignment, write_hairpin_pdb

    folder = tmp_path_factory.mktemp("family")
    alignment = write_alignment(folder / "tiny.a3m")
    return {"msa": alignment, "pdb": write_hairpin_pdb(folder / "tiny.pdb", query_of(alignment))}


@pytest.fixture(scope="session")
def tiny_promoter_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained two-class ``PromoterClassifier`` (max_len 50, width 16, 2 heads, 1 layer, conv kernel 5; seed 0)
    saved as a run directory: what scan tests score windows with."""
    import torch

    from bioattn.models.promoter import PromoterClassifier

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny_promoter_run")
    PromoterClassifier(max_len=50, embed_dim=16, num_heads=2, num_layers=1, conv_kernel=5).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def msa_quick_run(family: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``bioattn train msa --msa <family> --quick``: a one-seed run directory."""
    from bioattn.cli import main as cli_main

    out = tmp_path_factory.mktemp("msa_quick_run") / "run"
    assert cli_main(["train", "msa", "--input", str(family["msa"]), "--out", str(out), "--quick"]) == 0
    return out


@pytest.fixture(scope="session")
def promoter_binary_data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Two-class (``neg`` / ``pos``) synthetic promoter records: 600 to train on, 120 to test, and their CSV files."""
    from test_promoter_own_data import make_records, write_csv

    folder = tmp_path_factory.mktemp("binary")
    records = make_records(("neg", "pos"), 600, seed=1)
    test = make_records(("neg", "pos"), 120, seed=2)
    return {"folder": folder, "records": records, "test": test,
            "train_csv": write_csv(folder / "train.csv", records), "test_csv": write_csv(folder / "test.csv", test)}


@pytest.fixture(scope="session")
def promoter_binary_run(promoter_binary_data: dict[str, object], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny deterministic ``bioattn train promoter`` run on :func:`promoter_binary_data` (``--train``, ``--test``)."""
    from test_promoter_own_data import train

    return train(tmp_path_factory.mktemp("binary_run"), "--train", str(promoter_binary_data["train_csv"]),
                 "--test", str(promoter_binary_data["test_csv"]))


@pytest.fixture(scope="session")
def ct_own_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``labels.csv`` (relative paths) beside ``scans/``: 12 NIfTI masks, alternately ``none`` / ``blob``, and one
    DICOM series (``blob``)."""
    from test_ct_own_data import VOLUMES, _dicom_series, _mask, _nifti, _write_csv

    root = tmp_path_factory.mktemp("own_data")
    rng = np.random.default_rng(0)
    rows = []
    for index in range(VOLUMES):
        label = "blob" if index % 2 else "none"
        _nifti(root / "scans" / f"scan{index:02d}.nii.gz", _mask(rng, index % 2 == 1))
        rows.append([f"scans/scan{index:02d}.nii.gz", label])
    _dicom_series(root / "scans" / "dicom_series", _mask(rng, True))
    rows.append(["scans/dicom_series", "blob"])
    return _write_csv(root / "labels.csv", ["image", "label"], rows)


@pytest.fixture(scope="session")
def ct_own_run(ct_own_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """A quick tuned-protocol ``bioattn train ct`` run on :func:`ct_own_data` (3 epochs, one thread), and how many
    times nibabel opened each NIfTI file meanwhile."""
    import nibabel as nib
    import torch
    from test_ct_own_data import TRAIN_FLAGS

    from bioattn.cli import main as cli_main

    reads: dict[str, int] = {}
    original = nib.load

    def counting_load(filename, *args, **kwargs):
        reads[str(Path(filename).resolve())] = reads.get(str(Path(filename).resolve()), 0) + 1
        return original(filename, *args, **kwargs)

    out = tmp_path_factory.mktemp("runs") / "run"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(nib, "load", counting_load)
            assert cli_main(["train", "ct", "--manifest", str(ct_own_data), "--out", str(out), "--epochs", "3",
                             *TRAIN_FLAGS]) == 0
    finally:
        torch.set_num_threads(threads)
    return out, reads
