"""Download the public datasets (``datasets.json``) into a data root, with checksums, resume and retries."""
from __future__ import annotations

import hashlib
import http.client
import json
import os
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bioattn.data.root import DATA_ROOT_ENV
from bioattn.errors import UserInputError
from bioattn.progress import progress_bar

REGISTRY_PATH = Path(__file__).resolve().parent / "datasets.json"
ATTEMPTS = 4
CHUNK_BYTES = 1 << 16
TIMEOUT_S = 60.0
_TRANSIENT_ERRORS = (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError, OSError)


@dataclass(frozen=True)
class RemoteFile:
    """One file of a dataset: ``path`` under the data root, ``url`` (None: see ``note``), checksums and ``size``."""
    path: str
    url: str | None
    sha256: str | None = None
    md5: str | None = None
    size: int | None = None
    note: str | None = None

    @property
    def verifiable(self) -> bool:
        return self.sha256 is not None or self.md5 is not None


@dataclass(frozen=True)
class Dataset:
    """A named group of files (``bioattn data fetch NAME``), with its license and data card."""
    name: str
    description: str
    license: str
    card: str
    files: tuple[RemoteFile, ...]


@dataclass(frozen=True)
class FetchResult:
    """One file's outcome: ``status`` ``downloaded``, ``present`` or ``skipped``; ``verified``: checksum checked."""
    file: RemoteFile
    status: str
    verified: bool


def load_registry(path: Path | None = None) -> dict[str, Dataset]:
    """The datasets of the registry file (default: :data:`REGISTRY_PATH`), by name."""
    raw = json.loads((path or REGISTRY_PATH).read_text())
    return {name: Dataset(name, entry["description"], entry["license"], entry["card"],
                          tuple(RemoteFile(**file) for file in entry["files"]))
            for name, entry in raw.items()}


class ChecksumError(UserInputError):
    """A downloaded file's checksum differs from the registry's."""


def file_digest(path: Path, algorithm: str) -> str:
    """Hex digest of ``path`` with ``algorithm`` (``"sha256"``, ``"md5"``), read in chunks."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def checksum_problem(path: Path, remote: RemoteFile) -> str | None:
    """None when ``path`` matches ``remote``'s checksum (or it has none), else what differs."""
    for algorithm in ("sha256", "md5"):
        expected = getattr(remote, algorithm)
        if expected is not None:
            actual = file_digest(path, algorithm)
            return None if actual == expected.lower() else f"{algorithm} {actual}, expected {expected}"
    return None


def _open(url: str, offset: int, timeout: float) -> http.client.HTTPResponse:
    headers = {"User-Agent": "bioattn-data-fetch"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)


def _transfer(url: str, part: Path, label: str, progress: bool, timeout: float) -> None:
    """Append the rest of ``url`` to ``part`` (resuming when the server honours ``Range``); transient errors raise."""
    offset = part.stat().st_size if part.exists() else 0
    try:
        response = _open(url, offset, timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:  # the .part already holds the whole file
            return
        raise
    with response:
        if offset and response.status != 206:  # range ignored: start over
            offset = 0
        length = response.headers.get("Content-Length")
        expected = offset + int(length) if length is not None else None
        received = offset
        with open(part, "ab" if offset else "wb") as out, \
                progress_bar(total=expected, initial=offset, unit="B", unit_scale=True, desc=label,
                             disable=not progress, leave=False) as bar:
            for block in iter(lambda: response.read(CHUNK_BYTES), b""):
                out.write(block)
                received += len(block)
                bar.update(len(block))
    if expected is not None and received < expected:
        raise ConnectionError(f"connection closed after {received:,} of {expected:,} bytes")


def download(remote: RemoteFile, dest: Path, *, progress: bool = True, attempts: int = ATTEMPTS,
             timeout: float = TIMEOUT_S, log: Callable[[str], None] = lambda message: print(message, file=sys.stderr)) -> None:
    """Download ``remote.url`` to ``dest`` via ``dest.part`` (resumed, retried, verified: :class:`ChecksumError`)."""
    if remote.url is None:
        raise UserInputError(f"{remote.path}: no public URL known ({remote.note})")
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    resumed = part.exists()
    last_error: BaseException | None = None
    for attempt in range(1, attempts + 1):
        try:
            _transfer(remote.url, part, dest.name, progress, timeout)
        except urllib.error.HTTPError as exc:
            if exc.code < 500 and exc.code != 429:  # not found, forbidden...: retrying will not help
                raise UserInputError(f"{remote.url}: HTTP {exc.code} {exc.reason}") from exc
            last_error = exc
        except _TRANSIENT_ERRORS as exc:
            last_error = exc
        else:
            problem = checksum_problem(part, remote)
            if problem is None:
                os.replace(part, dest)
                return
            part.unlink()
            if not resumed:
                raise ChecksumError(f"{remote.url}: checksum mismatch ({problem}); the download was deleted")
            log(f"{dest.name}: resumed download is corrupt ({problem}); downloading it again")
            resumed = False
            continue
        resumed = part.exists()
        if attempt < attempts:
            log(f"{dest.name}: download interrupted ({last_error}); {'resuming' if resumed else 'retrying'} "
                f"({attempt + 1}/{attempts})")
    raise UserInputError(f"{remote.url}: download failed after {attempts} attempts ({last_error}); run the command "
                         f"again to resume from {part}")


def fetch_dataset(dataset: Dataset, root: Path, *, progress: bool = True,
                  log: Callable[[str], None] = lambda message: print(message, file=sys.stderr)) -> list[FetchResult]:
    """Download every file of ``dataset`` under ``root``, keeping those already there with the right checksum."""
    results = []
    for remote in progress_bar(dataset.files, desc=dataset.name, unit="file", disable=not progress):
        dest = root / remote.path
        if remote.url is None:
            log(f"{remote.path}: skipped, {remote.note}")
            results.append(FetchResult(remote, "skipped", False))
            continue
        if dest.exists():
            problem = checksum_problem(dest, remote)
            if problem is None:
                results.append(FetchResult(remote, "present", remote.verifiable))
                continue
            log(f"{dest}: present but differs ({problem}); downloading it again")
        download(remote, dest, progress=progress, log=log)
        log(f"{dest}: downloaded, " + ("checksum verified" if remote.verifiable
                                       else f"UNVERIFIED (no checksum recorded for {remote.url})"))
        results.append(FetchResult(remote, "downloaded", remote.verifiable))
    return results


ALL = "all"
DEFAULT_FETCH_DIR = "bioattn-data"


def fetch_datasets(name: str, root: str | os.PathLike | None = None, *, progress: bool = True,
                   report: Callable[[str], None] = print) -> Path:
    """``bioattn data fetch NAME``: download ``name`` (or :data:`ALL`) under ``root``; returns the root."""
    folder = Path(root) if root is not None else Path(os.environ.get(DATA_ROOT_ENV) or DEFAULT_FETCH_DIR)
    registry = load_registry()
    if name != ALL and name not in registry:
        raise UserInputError(f"unknown dataset {name!r}; choose one of {', '.join(registry)} or {ALL}")
    unverified = []
    for key in list(registry) if name == ALL else [name]:
        dataset = registry[key]
        report(f"{key}: {dataset.description} ({dataset.license}; see {dataset.card})")
        results = fetch_dataset(dataset, folder, progress=progress)
        counts = {status: sum(r.status == status for r in results) for status in ("downloaded", "present", "skipped")}
        unverified += [r.file.path for r in results if r.status != "skipped" and not r.verified]
        report(f"{key}: {counts['downloaded']} downloaded, {counts['present']} already present, "
               f"{counts['skipped']} skipped, under {folder}")
    if unverified:
        report(f"UNVERIFIED (no checksum recorded): {', '.join(unverified)}")
    report(f"use it with --data-root {folder} or {DATA_ROOT_ENV}={folder}")
    return folder
