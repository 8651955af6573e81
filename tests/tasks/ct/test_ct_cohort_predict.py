"""CT cohorts: a manifest predicted with DataLoader workers and batches > 1, or sharded under torchrun, gives the
rows of one process reading in the main thread one scan at a time, in manifest order."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import REPO_ROOT
from tests.helpers.ct_volumes import predict_ct_rows, write_csv_rows


@pytest.fixture(scope="module")
def cohort(ct_own_data: Path) -> Path:
    """The scans in a shuffled order (the output must follow it), NIfTI and DICOM mixed."""
    listed = [line.split(",")[0] for line in ct_own_data.read_text().splitlines()[1:]]
    order = np.random.default_rng(3).permutation(len(listed))
    return write_csv_rows(ct_own_data.parent / "cohort.csv", ["image"], [[listed[i]] for i in order])


def _table(rows: list[dict[str, str]]) -> tuple[list[str], np.ndarray]:
    return [r["image"] for r in rows], np.array([[float(r["p_blob"]), float(r["p_none"])] for r in rows])


@pytest.mark.slow
def test_workers_and_batches_give_the_one_at_a_time_rows_in_manifest_order(ct_own_run, cohort, tmp_path):
    run, _ = ct_own_run
    names, one = _table(predict_ct_rows(run, cohort, tmp_path / "one.csv", "--batch-size", "1", "--workers", "0"))
    listed = [line.split(",")[0] for line in cohort.read_text().splitlines()[1:]]
    assert [Path(n).resolve() for n in names] == [(cohort.parent / p).resolve() for p in listed]  # manifest order
    names_many, many = _table(predict_ct_rows(run, cohort, tmp_path / "many.csv", "--batch-size", "4", "--workers", "2"))
    assert names_many == names
    np.testing.assert_allclose(many, one, rtol=0, atol=1e-5)  # batching changes float rounding only


@pytest.mark.slow
def test_torchrun_shards_write_the_one_process_file(ct_own_run, cohort, tmp_path):
    run, _ = ct_own_run
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    flags = ["predict", "ct", "--model", str(run), "--input", str(cohort), "--batch-size", "2", "--device", "cpu"]
    one, two = tmp_path / "one.csv", tmp_path / "two.csv"
    done = subprocess.run([sys.executable, "-m", "bioattn.cli", *flags, "--output", str(one)], env=env,
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           "-m", "bioattn.cli", *flags, "--output", str(two)], env=env, capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert two.read_bytes() == one.read_bytes()
