"""Atomic file writing, the one CSV/TSV writer, and safetensors + JSON persistence."""
from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Iterator, Sequence

import numpy as np

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
    """Open a temporary file beside ``path``; rename it onto ``path`` only if the block succeeds."""
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
        os.chmod(tmp, 0o666 & ~_current_umask())  # mkstemp creates 0600
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def prepare_output(path: str | os.PathLike, *, folder: bool = False) -> Path | str:
    """Check, creating nothing, that the output file (or ``folder``) ``path`` can be written."""
    if str(path) == STDOUT and not folder:
        return STDOUT
    path = Path(path).expanduser()
    what = "output directory" if folder else "output file"
    if folder and path.exists() and not path.is_dir():
        raise UserInputError(f"{path}: {what} exists and is not a directory")
    if not folder and path.is_dir():
        raise UserInputError(f"{path}: {what} is a directory; give a file name")
    existing = path if folder else path.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UserInputError(f"{path}: {what} is not writable ({existing} is a file, not a directory)")
    try:
        os.rmdir(tempfile.mkdtemp(dir=existing, prefix=".bioattn-write-check-"))
    except OSError as exc:
        raise UserInputError(f"{path}: {what} is not writable ({exc.strerror or exc})") from exc
    return path


#: How every table bioattn writes formats a float.
FLOAT_FORMAT = ".6g"
#: Tab-separated file endings; anything else is comma-separated.
TAB_SEPARATED = (".tsv", ".bedgraph", ".bed", ".tsv.gz")
STDOUT = "-"  # as an output path: standard output; as an input path (input_file): standard input
#: A table for standard output is held in memory up to this size until it is complete.
STDOUT_SPOOL_BYTES = 16 << 20


def format_cell(value: Any) -> Any:
    """A table cell as written: floats (Python or numpy) with :data:`FLOAT_FORMAT`, NaN as ``nan``, None as empty."""
    if value is None:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return "nan" if math.isnan(value) else format(float(value), FLOAT_FORMAT)
    if isinstance(value, np.integer):
        return int(value)
    return value


def _delimiter_for(path: str | os.PathLike) -> str:
    return "\t" if str(path).lower().endswith(TAB_SEPARATED) else ","


def _row_writer(handle: IO[str], delimiter: str) -> Callable[[Sequence[Any]], None]:
    writer = csv.writer(handle, delimiter=delimiter, lineterminator="\n")
    return lambda row: writer.writerow([format_cell(value) for value in row])


@contextlib.contextmanager
def input_file(path: str | os.PathLike) -> Iterator[Path]:
    """Yield ``path``, or for ``-`` a temporary copy of standard input (errors name it ``<stdin>``)."""
    if str(path) != STDOUT:
        yield Path(path)
        return
    with tempfile.TemporaryDirectory(prefix="bioattn-stdin-") as folder:
        copy = Path(folder) / "stdin"
        with open(copy, "wb") as handle:
            shutil.copyfileobj(sys.stdin.buffer, handle)
        try:
            yield copy
        except UserInputError as exc:
            raise UserInputError(str(exc).replace(str(copy), "<stdin>")) from None


@contextlib.contextmanager
def table_writer(path: str | os.PathLike, header: Sequence[str] | None, *,
                 delimiter: str | None = None) -> Iterator[Callable[[Sequence[Any]], None]]:
    """Yield ``write_row(values)`` for a table written atomically at ``path`` (``-``: standard output)."""
    delimiter = delimiter or _delimiter_for(path)

    def writer_for(handle: IO[str]) -> Callable[[Sequence[Any]], None]:
        write_row = _row_writer(handle, delimiter)
        if header is not None:
            write_row(header)
        return write_row

    if str(path) == STDOUT:
        with tempfile.SpooledTemporaryFile(max_size=STDOUT_SPOOL_BYTES, mode="w+", newline="") as spool:
            yield writer_for(spool)
            spool.seek(0)
            shutil.copyfileobj(spool, sys.stdout)
        sys.stdout.flush()
        return
    with atomic_write(path, newline="") as handle:
        yield writer_for(handle)


def write_table(path: str | os.PathLike, header: Sequence[str] | None, rows: Iterable[Sequence[Any]], *,
                delimiter: str | None = None) -> Path:
    """Write a whole table with :func:`table_writer`; returns ``path``."""
    with table_writer(path, header, delimiter=delimiter) as write_row:
        for row in rows:
            write_row(row)
    return Path(path)


def append_table_row(path: str | os.PathLike, row: Sequence[Any], *, delimiter: str | None = None) -> None:
    """Append one row to a table written by :func:`table_writer`."""
    with open(path, "a", newline="") as handle:
        _row_writer(handle, delimiter or _delimiter_for(path))(row)


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically (LF line endings as given)."""
    with atomic_write(path, newline="") as handle:
        handle.write(text)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    with atomic_write(path) as handle:
        json.dump(obj, handle, indent=2, sort_keys=True)
        handle.write("\n")


def save_figure(figure: Any, path: str | os.PathLike, *, dpi: int = 120, **savefig_kwargs: Any) -> Path:
    """Write a matplotlib ``figure`` as PNG to ``path`` atomically; returns the path."""
    path = Path(path)
    with atomic_write(path, "wb") as handle:
        figure.savefig(handle, format="png", dpi=dpi, **savefig_kwargs)
    return path


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
    except Exception as exc:
        raise UserInputError(f"{path}: not a readable safetensors file ({exc})") from exc
