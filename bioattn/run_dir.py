"""The run directory every command writes into: refuse, resume or overwrite (rank 0 creates it)."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from bioattn.distributed import init_distributed, run_on_main
from bioattn.errors import UserInputError
from bioattn.io import prepare_output


def check_run_dir(path: str | os.PathLike, *, resume: bool, overwrite: bool, resumable: bool = True) -> None:
    """Raise the :class:`UserInputError` :func:`prepare_run_dir` would raise for ``path``, changing nothing."""
    path = Path(path).expanduser()
    if resume and overwrite:
        raise UserInputError(f"{path}: choose either --resume or --overwrite, not both")
    _to_replace(path, resume, overwrite, resumable)
    prepare_output(path, folder=True)


def prepare_run_dir(path: str | os.PathLike, *, resume: bool, overwrite: bool, resumable: bool = True) -> Path:
    """Create the run directory (rank 0; the other ranks wait), refusing a non-empty one."""
    path = Path(path).expanduser()
    if resume and overwrite:
        raise UserInputError(f"{path}: choose either --resume or --overwrite, not both")
    init_distributed()

    def prepare() -> None:
        if _to_replace(path, resume, overwrite, resumable):
            shutil.rmtree(path)
        try:
            path.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=path):
                pass
        except OSError as exc:
            raise UserInputError(f"{path}: output directory is not writable ({exc.strerror or exc})") from exc

    run_on_main(prepare)
    return path


def _to_replace(path: Path, resume: bool, overwrite: bool, resumable: bool) -> bool:
    """Whether ``path`` is a non-empty directory to delete (``overwrite``); raise when it may not be used."""
    if path.exists() and not path.is_dir():
        raise UserInputError(f"{path}: exists and is not a directory")
    if not (path.is_dir() and any(path.iterdir())):
        return False
    if overwrite:
        _refuse_dangerous_overwrite(path)
        return True
    if not resume:
        choices = "pass --resume to continue that run or --overwrite" if resumable else "pass --overwrite"
        raise UserInputError(f"{path}: output directory already exists and is not empty; {choices} to replace it")
    return False


def _refuse_dangerous_overwrite(path: Path) -> None:
    resolved = path.resolve()
    protected = {Path(resolved.anchor), Path.home().resolve(), Path.cwd().resolve(), *Path.cwd().resolve().parents}
    if resolved in protected:
        raise UserInputError(f"{path}: refusing to delete this directory with --overwrite; "
                             "choose a dedicated output directory")
