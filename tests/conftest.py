"""Shared test fixtures; they apply to every folder under tests/. Code the tests share that is not a fixture lives
in ``tests/helpers/``.

Tests that read the real datasets ask for them through :func:`require_data`: without a data root they skip,
unless ``BIOATTN_REQUIRE_DATA=1`` (set by ``.ci/run``), in which case a missing dataset fails the test instead
of skipping it silently.
"""
from __future__ import annotations

import os
import sys

# Cache compiled bytecode even where the environment says not to (PYTHONDONTWRITEBYTECODE=1): otherwise every worker
# and every `bioattn` subprocess or notebook kernel the tests start compiles bioattn and re-rewrites the test modules
# from source again. Set before the imports below, and for the subprocesses through the environment.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import json
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
import torch

from tests.helpers.real_data import data_path
from tests.helpers.shared_runs import shared_run

# One torch thread per test process: the suite runs on one pytest-xdist worker per core (README, pyproject.toml), so
# intra-op threads would only oversubscribe the cores. Tests that measure threading set their own count.
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def one_torch_thread_after_each_test():
    """A test (or a benchmark's smoke mode run in-process) that sets its own thread count does not pass it on: the
    next test on this worker starts with one thread again. (A bench script left 2 threads behind once, and the HU
    pilot run after it on the same worker took 19 CPU-minutes instead of 6, its two threads fighting the other
    worker for the cores.)"""
    yield
    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)


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

    def build(folder: Path) -> None:
        write_hairpin_pdb(folder / "tiny.pdb", query_of(write_alignment(folder / "tiny.a3m")))

    folder = shared_run(tmp_path_factory, "family", "tiny", build)
    return {"msa": folder / "tiny.a3m", "pdb": folder / "tiny.pdb"}


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
    """``bioattn train msa --input <family> --quick``: a one-seed run directory."""
    from bioattn.cli import main as cli_main

    flags = ["train", "msa", "--input", str(family["msa"]), "--quick"]

    def build(folder: Path) -> None:
        assert cli_main([*flags, "--out", str(folder / "run")]) == 0

    return shared_run(tmp_path_factory, "msa_quick_run", flags, build) / "run"


@pytest.fixture(scope="session")
def promoter_binary_data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Two-class (``neg`` / ``pos``) synthetic promoter records: 600 to train on, 120 to test, and their CSV files."""
    from tests.helpers.promoter_records import make_records, write_csv

    records = make_records(("neg", "pos"), 600, seed=1)
    test = make_records(("neg", "pos"), 120, seed=2)

    def build(folder: Path) -> None:
        write_csv(folder / "train.csv", records)
        write_csv(folder / "test.csv", test)

    folder = shared_run(tmp_path_factory, "binary", [600, 1, 120, 2], build)
    return {"folder": folder, "records": records, "test": test,
            "train_csv": folder / "train.csv", "test_csv": folder / "test.csv"}


@pytest.fixture(scope="session")
def promoter_binary_run(promoter_binary_data: dict[str, object], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny deterministic ``bioattn train promoter`` run on :func:`promoter_binary_data` (``--train``, ``--test``)."""
    from tests.helpers.promoter_records import train

    flags = ("--train", str(promoter_binary_data["train_csv"]), "--test", str(promoter_binary_data["test_csv"]))
    return shared_run(tmp_path_factory, "binary_run", flags, lambda folder: train(folder, *flags)) / "run"


@pytest.fixture(scope="session")
def ct_own_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``labels.csv`` (relative paths) beside ``scans/``: 12 NIfTI masks, alternately ``none`` / ``blob``, and one
    DICOM series (``blob``)."""
    from tests.helpers.ct_volumes import VOLUMES, noisy_mask, write_csv_rows, write_dicom_series, write_nifti

    def build(root: Path) -> None:
        rng = np.random.default_rng(0)
        rows = []
        for index in range(VOLUMES):
            label = "blob" if index % 2 else "none"
            write_nifti(root / "scans" / f"scan{index:02d}.nii.gz", noisy_mask(rng, index % 2 == 1))
            rows.append([f"scans/scan{index:02d}.nii.gz", label])
        write_dicom_series(root / "scans" / "dicom_series", noisy_mask(rng, True))
        rows.append(["scans/dicom_series", "blob"])
        write_csv_rows(root / "labels.csv", ["image", "label"], rows)

    return shared_run(tmp_path_factory, "own_data", VOLUMES, build) / "labels.csv"


@pytest.fixture(scope="session")
def ct_own_run(ct_own_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """A quick tuned-protocol ``bioattn train ct`` run on :func:`ct_own_data` (3 epochs, one thread), and how many
    times nibabel opened each NIfTI file meanwhile."""
    import nibabel as nib

    from bioattn.cli import main as cli_main
    from tests.helpers.ct_volumes import TRAIN_FLAGS

    flags = ["train", "ct", "--manifest", str(ct_own_data), "--epochs", "3", *TRAIN_FLAGS]

    def build(folder: Path) -> None:
        reads: dict[str, int] = {}
        original = nib.load

        def counting_load(filename, *args, **kwargs):
            reads[str(Path(filename).resolve())] = reads.get(str(Path(filename).resolve()), 0) + 1
            return original(filename, *args, **kwargs)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(nib, "load", counting_load)
            assert cli_main([*flags, "--out", str(folder / "run")]) == 0
        (folder / "reads.json").write_text(json.dumps(reads))

    folder = shared_run(tmp_path_factory, "ct_own_run", flags, build)
    return folder / "run", json.loads((folder / "reads.json").read_text())


# ------------------------------------------------------------------ scheduling: the longest work starts first
# pytest-xdist (``--dist loadgroup``, in pyproject.toml) keeps each test file on one worker, so that its module fixtures
# run once, except the files in SPREAD: their tests share no module fixture and each is long (a notebook, a shipped
# model's card), so they are handed out one by one. Work is handed out in collection order, and starting the longest
# first keeps both workers busy to the end: ``tests/durations.json`` holds each file's measured seconds (update it with
# ``python -m tests.helpers.durations LOG`` from a run with ``--durations=0``); a file it does not know counts as 1 s.
DURATIONS = Path(__file__).with_name("durations.json")
SPREAD = {"tests/project/test_notebooks.py", "tests/models/test_shipped_models.py", "tests/project/test_docs.py"}
# TF-MoDISco (modisco-lite) compiles its numba code in every process that calls it, and TOMTOM (memelite) compiles
# its code on first use until numba's on-disk cache holds it (minutes on a fresh install): the files that run either
# share one worker, and so does the notebook that runs both in its kernel, so neither compilation runs twice at once
# (the notebook's kernel still compiles TF-MoDISco, but TOMTOM then loads from the cache the worker wrote).
NUMBA_GROUP = "numba: TF-MoDISco and TOMTOM"
NUMBA_FILES = {"tests/explain/test_explain_one_call_writes_outputs.py"}
NUMBA_FOLDERS = ("tests/explain/motifs/",)
NUMBA_TESTS = {"tests/project/test_notebooks.py::test_notebook_runs_at_quick_size_and_its_conclusions_hold[09_motifs]"}


def xdist_group_of(nodeid: str) -> str | None:
    """The group a test shares with others (a test file's tests share one; None: handed out one by one)."""
    path = nodeid.split("::")[0]
    if nodeid in NUMBA_TESTS or path in NUMBA_FILES or path.startswith(NUMBA_FOLDERS):
        return NUMBA_GROUP
    if path in SPREAD:
        return None
    return path


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist turns the groups into node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seconds = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    order: dict[str, int] = {}
    count: dict[str, int] = {}
    group_seconds: dict[str, float] = {}
    for item in items:
        path = item.location[0]
        count[path] = count.get(path, 0) + 1
        if path not in order:
            order[path] = len(order)
            if path not in SPREAD:
                group = xdist_group_of(path)
                group_seconds[group] = group_seconds.get(group, 0.0) + seconds.get(path, 1.0)
    for item in items:
        group = xdist_group_of(item.nodeid)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
            if item.location[0] in SPREAD:  # one test of a spread file in a group: its own seconds
                group_seconds[group] = group_seconds.get(group, 0.0) + seconds.get(item.nodeid, 1.0)

    def unit_seconds(item: pytest.Item) -> float:
        path = item.location[0]
        group = xdist_group_of(item.nodeid)
        if group is None:  # a test of its own: its measured seconds (durations.json keys it by node id), else its share
            return seconds.get(item.nodeid, seconds.get(path, 1.0) / count[path])
        return group_seconds[group]

    items.sort(key=lambda item: (-unit_seconds(item), order[item.location[0]]))
