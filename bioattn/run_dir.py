"""The run directory every command writes into: the creation rules (refuse, resume, overwrite), shared by training,
prediction and explanation (rank 0 creates it, the other ranks wait)."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from bioattn.distributed import init_distributed, run_on_main
from bioattn.errors import UserInputError
from bioattn.io import prepare_output


def check_run_dir(path: str | os.PathLike, *, resume: bool, overwrite: bool, resumable: bool = True) -> None:
    """Raise the :class:`UserInputError` :func:`prepare_run_dir` would raise for ``path``, changing nothing.

    Commands call it first, so an existing run directory is refused before any data is read or cached.
    """
    path = Path(path).expanduser()
    if resume and overwrite:
        raise UserInputError(f"{path}: choose either --resume or --overwrite, not both")
    if path.exists() and not path.is_dir():
        raise UserInputError(f"{path}: exists and is not a directory")
    if path.is_dir() and any(path.iterdir()):
        if overwrite:
            _refuse_dangerous_overwrite(path)
        elif not resume:
            choices = "pass --resume to continue that run or --overwrite" if resumable else "pass --overwrite"
            raise UserInputError(f"{path}: output directory already exists and is not empty; {choices} to replace it")
    prepare_output(path, folder=True)  # an unwritable place is refused now, not after the training


def prepare_run_dir(path: str | os.PathLike, *, resume: bool, overwrite: bool, resumable: bool = True) -> Path:
    """Create the run directory (rank 0; the other ranks wait) and check that it can be written.

    An existing non-empty directory is refused unless ``resume`` (continue it) or ``overwrite``
    (delete its contents first); the error suggests ``--resume`` only when the command is ``resumable``.
    Raises :class:`UserInputError` on every rank when the directory cannot be used.
    """
    path = Path(path).expanduser()
    if resume and overwrite:
        raise UserInputError(f"{path}: choose either --resume or --overwrite, not both")
    init_distributed()

    def prepare() -> None:
        if path.exists() and not path.is_dir():
            raise UserInputError(f"{path}: exists and is not a directory")
        if path.is_dir() and any(path.iterdir()):
            if overwrite:
                _refuse_dangerous_overwrite(path)
                shutil.rmtree(path)
            elif not resume:
                choices = "pass --resume to continue that run or --overwrite" if resumable else "pass --overwrite"
                raise UserInputError(f"{path}: output directory already exists and is not empty; {choices} to replace it")
        try:
            path.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=path):
                pass
        except OSError as exc:
            raise UserInputError(f"{path}: output directory is not writable ({exc.strerror or exc})") from exc

    run_on_main(prepare)
    return path


def _refuse_dangerous_overwrite(path: Path) -> None:
    resolved = path.resolve()
    protected = {Path(resolved.anchor), Path.home().resolve(), Path.cwd().resolve(), *Path.cwd().resolve().parents}
    if resolved in protected:
        raise UserInputError(f"{path}: refusing to delete this directory with --overwrite; choose a dedicated output directory")
