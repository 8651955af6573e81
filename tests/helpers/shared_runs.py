"""Trained runs made once per test run and shared by every module and every pytest-xdist worker that asks for them.

A run is keyed by a name and its options: :func:`shared_run` builds it the first time any worker asks (the other
workers wait on a file lock) under a folder common to all workers of this test session, and returns the same
folder to every later caller. Tests read these folders and write their own outputs under their own ``tmp_path``.

Example::

    @pytest.fixture(scope="session")
    def activity_run(tmp_path_factory):
        flags = ("--quick", "--seed", "0")
        return shared_run(tmp_path_factory, "activity", flags, lambda out: train_activity(out, *flags))
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable

import pytest
from filelock import FileLock

DONE = ".shared-run-done"


def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder shared by all workers of this test session (the base temporary folder's parent under xdist)."""
    base = tmp_path_factory.getbasetemp()
    # Under pytest-xdist each worker's base temp is <session>/popen-gwN; the session folder is common to them all.
    root = base.parent if base.name.startswith("popen-gw") else base
    folder = root / "shared-runs"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def shared_run(tmp_path_factory: pytest.TempPathFactory, name: str, options: Any,
               build: Callable[[Path], Any]) -> Path:
    """The folder ``build(folder)`` filled, made once per test session for this ``name`` and ``options``.

    ``options`` is anything JSON can write (the flags or settings that decide the run); two callers with the same
    name and options share one folder. A build that raises leaves nothing behind, so the next caller builds anew.
    """
    key = hashlib.sha1(json.dumps([name, options], sort_keys=True, default=str).encode()).hexdigest()[:12]
    folder = shared_root(tmp_path_factory) / f"{name}-{key}"
    with FileLock(str(folder) + ".lock"):
        if (folder / DONE).exists():
            return folder
        if folder.exists():  # a build that failed part-way in another worker
            import shutil

            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        try:
            build(folder)
        except BaseException:
            import shutil

            shutil.rmtree(folder, ignore_errors=True)
            raise
        (folder / DONE).write_text(json.dumps([name, options], default=str))
    return folder
