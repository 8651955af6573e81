"""Shared test fixtures; they apply to every folder under tests/. Code the tests share that is not a fixture lives
in ``tests/helpers/``.

Tests that read the real datasets ask for them through :func:`require_data`: without a data root they skip,
unless ``BIOATTN_REQUIRE_DATA=1`` (set by ``.ci/run``), in which case a missing dataset fails the test instead
of skipping it silently.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from tests.helpers.real_data import data_path


@pytest.fixture(autouse=True)
def fresh_emulated_bf16_warning():
    """The emulated-bf16 warning prints once per process; each test starts as a new process would."""
    from bioattn import precision

    precision._warn_emulated_bf16.cache_clear()


@pytest.fixture
def require_data() -> Callable[..., Path]:
    """The :func:`data_path` function, as a fixture."""
    return data_path


# ------------------------------------------------------------------ shared inputs and trained runs (once per session)
# Each trained run below is made once per test session and shared by every module that asks for it, instead of each
# module training its own; tests read these folders and write their own outputs under their own tmp_path.
@pytest.fixture(scope="session")
def family(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny planted alignment (``msa``, 30 columns) and a hairpin structure of its query (``pdb``)."""
    from tests.helpers.msa_family import query_of, write_alignment, write_hairpin_pdb

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
    from tests.helpers.promoter_records import make_records, write_csv

    folder = tmp_path_factory.mktemp("binary")
    records = make_records(("neg", "pos"), 600, seed=1)
    test = make_records(("neg", "pos"), 120, seed=2)
    return {"folder": folder, "records": records, "test": test,
            "train_csv": write_csv(folder / "train.csv", records), "test_csv": write_csv(folder / "test.csv", test)}


@pytest.fixture(scope="session")
def promoter_binary_run(promoter_binary_data: dict[str, object], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny deterministic ``bioattn train promoter`` run on :func:`promoter_binary_data` (``--train``, ``--test``)."""
    from tests.helpers.promoter_records import train

    return train(tmp_path_factory.mktemp("binary_run"), "--train", str(promoter_binary_data["train_csv"]),
                 "--test", str(promoter_binary_data["test_csv"]))


@pytest.fixture(scope="session")
def ct_own_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``labels.csv`` (relative paths) beside ``scans/``: 12 NIfTI masks, alternately ``none`` / ``blob``, and one
    DICOM series (``blob``)."""
    from tests.helpers.ct_volumes import VOLUMES, noisy_mask, write_csv_rows, write_dicom_series, write_nifti

    root = tmp_path_factory.mktemp("own_data")
    rng = np.random.default_rng(0)
    rows = []
    for index in range(VOLUMES):
        label = "blob" if index % 2 else "none"
        write_nifti(root / "scans" / f"scan{index:02d}.nii.gz", noisy_mask(rng, index % 2 == 1))
        rows.append([f"scans/scan{index:02d}.nii.gz", label])
    write_dicom_series(root / "scans" / "dicom_series", noisy_mask(rng, True))
    rows.append(["scans/dicom_series", "blob"])
    return write_csv_rows(root / "labels.csv", ["image", "label"], rows)


@pytest.fixture(scope="session")
def ct_own_run(ct_own_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """A quick tuned-protocol ``bioattn train ct`` run on :func:`ct_own_data` (3 epochs, one thread), and how many
    times nibabel opened each NIfTI file meanwhile."""
    import nibabel as nib
    import torch

    from bioattn.cli import main as cli_main
    from tests.helpers.ct_volumes import TRAIN_FLAGS

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
