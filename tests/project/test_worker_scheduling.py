"""How the suite's two workers share the tests (tests/conftest.py, pyproject.toml): the tests of one file run on one
worker, in order, so that its module fixtures run once; and a test that sets its own torch thread count does not
pass it on to the next test of that worker."""
from __future__ import annotations

import os

import torch

#: The worker (process) that ran each test of this file so far.
SEEN: list[tuple[str, int]] = []


def test_a_test_may_set_its_own_thread_count() -> None:
    assert torch.get_num_threads() == 1
    SEEN.append((os.environ.get("PYTEST_XDIST_WORKER", "main"), os.getpid()))
    torch.set_num_threads(2)  # as a benchmark's smoke mode run in-process does, without restoring it


def test_the_tests_of_a_file_share_one_worker_and_its_next_test_has_one_thread_again() -> None:
    # Grouping by file is pytest-xdist's --dist loadgroup with the xdist_group marks conftest.py adds; with pytest
    # 9.2 it stopped grouping without a word (pytest-xdist issue 1386), and every module fixture ran on both workers.
    assert SEEN == [(os.environ.get("PYTEST_XDIST_WORKER", "main"), os.getpid())], "the first test ran elsewhere"
    assert torch.get_num_threads() == 1


def test_the_durations_table_keys_tests_without_the_group_suffix_the_workers_add() -> None:
    """``python -m tests.helpers.durations LOG`` reads ``--durations`` lines as pytest-xdist prints them (node id, then
    ``@`` and the group): the keys are the node ids conftest.py looks up, a parameter id may hold an ``@``."""
    from tests.helpers.durations import per_file

    lines = ["12.00s call     tests/a/test_b.py::test_c[x-1]@tests/a/test_b.py",
             "11.50s setup    tests/a/test_b.py::test_d@numba: TF-MoDISco and TOMTOM",
             "13.00s call     tests/n/test_x.py::test_e[a@b]", "0.50s teardown tests/n/test_x.py::Cls::test_f"]
    assert per_file(lines) == {"tests/a/test_b.py": 23.5, "tests/n/test_x.py": 13.5,
                               "tests/n/test_x.py::test_e[a@b]": 13.0, "tests/a/test_b.py::test_c[x-1]": 12.0,
                               "tests/a/test_b.py::test_d": 11.5}
