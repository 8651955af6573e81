"""Atomic file writing and safetensors + JSON persistence.

Everything bioattn writes for a user goes through :func:`atomic_write`: the content is written to a
temporary file in the destination folder and renamed over the target only once it is complete, so an
interrupted or failed write never leaves a half-written file and never destroys the previous one.
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import IO, Any, Iterator

import torch
from safetensors.torch import load_file
from safetensors.torch import save as safetensors_bytes

from bioattn.errors import UserInputError


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", **open_kwargs: Any) -> Iterator[IO]:
    """Open a temporary file beside ``path``; rename it onto ``path`` only if the block succeeds.

    Raises :class:`UserInputError` when the destination folder cannot be written.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise UserInputError(f"{path}: cannot write here ({exc.strerror or exc})") from exc
    try:
        with os.fdopen(fd, mode, **open_kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_current_umask())  # mkstemp creates 0600; give the usual permissions
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    with atomic_write(path) as handle:
        json.dump(obj, handle, indent=2, sort_keys=True)
        handle.write("\n")


def save_tensors(path: str | os.PathLike, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> None:
    """Save a flat dict of tensors as safetensors, atomically (contiguous CPU copies are made)."""
    cpu = {k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}
    with atomic_write(path, "wb") as handle:
        handle.write(safetensors_bytes(cpu, metadata=metadata))


def load_tensors(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """Load a safetensors file (no pickle is ever executed)."""
    path = Path(path)
    if not path.is_file():
        raise UserInputError(f"{path}: weights file not found")
    try:
        return load_file(str(path))
    except Exception as exc:  # safetensors raises its own error types for corrupt headers
        raise UserInputError(f"{path}: not a readable safetensors file ({exc})") from exc
