"""The outputs of a genome scan (csv/tsv, bedGraph, BED, bigWig), one target at a time."""
from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from bioattn.errors import UserInputError
from bioattn.io import atomic_write
from bioattn.tasks.promoter.text_columns import table_rows

#: Rows formatted at once (the writer gathers batches up to this many windows).
FORMAT_ROWS = 1 << 15
_BIGWIG_CHUNK = 1 << 16
_STRANDS = np.array(["-", ".", "+"])  # by strand code -1, 0, +1


@dataclass
class ScanSummary:
    """What a scan did: sequences, windows scored and skipped (only N), windows at/above the threshold, BED regions."""

    sequences: int = 0
    windows: int = 0
    skipped_n_only: int = 0
    above_threshold: int = 0
    regions: int = 0

    def as_list(self) -> list[int]:
        return [self.sequences, self.windows, self.skipped_n_only, self.above_threshold, self.regions]


def text_header(kind: str, class_name: str, delimiter: str) -> str:
    if kind == "csv":
        return delimiter.join(["chrom", "start", "end", "probability"]) + "\n"
    if kind == "bedgraph":
        return f"track type=bedGraph name=bioattn_p_{class_name.replace(' ', '_')}\n"
    return ""


def cell(text: str, delimiter: str) -> str:
    """A text cell as the csv module writes it (quoted when it holds the delimiter, a quote or a line break)."""
    return '"' + text.replace('"', '""') + '"' if any(c in text for c in (delimiter, '"', "\n", "\r")) else text


class TargetOutput:
    """The output of one target, fed batch by batch (:meth:`add`: windows or tiles, probabilities, BED strand codes)."""

    def __init__(self, chrom: str, kind: str, delimiter: str, threshold: float, class_name: str) -> None:
        self.kind, self.threshold, self.class_name, self.delimiter = kind, threshold, class_name, delimiter
        self.chrom = cell(chrom, delimiter)
        self._prefix = (self.chrom + delimiter).encode()
        self.parts: list[bytes] = []
        self.pending: list[tuple[np.ndarray, ...]] = []
        self.region: list[Any] | None = None  # [start, end, best, summit, strand code]
        self.pending_rows = self.above = self.regions = 0

    def add(self, starts: np.ndarray, ends: np.ndarray, probs: np.ndarray, strands: np.ndarray | None = None) -> None:
        above = probs >= self.threshold
        self.above += int(np.count_nonzero(above))
        if self.kind == "bed":
            if above.any():
                keep = np.flatnonzero(above)
                self._bed_windows(starts[keep], ends[keep], probs[keep],
                                  np.zeros(len(keep), dtype=np.int8) + 1 if strands is None else strands[keep])
            return
        self.pending.append((starts, ends, probs))
        self.pending_rows += len(probs)
        if self.kind != "bigwig" and self.pending_rows >= FORMAT_ROWS:
            self._format()

    def _format(self) -> None:
        if self.pending:
            starts, ends, probs = (np.concatenate(column) for column in zip(*self.pending))
            self.parts.append(table_rows(self._prefix, self.delimiter.encode(), [starts, ends], probs))
            self.pending, self.pending_rows = [], 0

    def _bed_windows(self, starts: np.ndarray, ends: np.ndarray, probs: np.ndarray, strands: np.ndarray) -> None:
        """Merge overlapping or touching windows into regions (summit and strand: the first best window's); the open
        region carries over to the next batch, as one window holding its best."""
        if self.region is not None:
            start, end, best, summit, strand = self.region
            starts, ends = np.concatenate([[start], starts]), np.concatenate([[end], ends])
            probs, strands = np.concatenate([[best], probs]), np.concatenate([[strand], strands])
            summits = np.concatenate([[summit], (starts[1:] + ends[1:]) // 2])
        else:
            summits = (starts + ends) // 2
        reach = np.maximum.accumulate(ends)
        first = np.flatnonzero(np.concatenate([[True], starts[1:] > reach[:-1]]))
        best = np.maximum.reduceat(probs, first)
        segment = np.repeat(np.arange(len(first)), np.diff(np.append(first, len(probs))))
        index = np.arange(len(probs))
        best_at = np.minimum.reduceat(np.where(probs == best[segment], index, len(probs)), first)
        last = np.append(first[1:], len(probs)) - 1
        regions = [[int(starts[a]), int(reach[z]), float(best[k]), int(summits[b]), int(strands[b])]
                   for k, (a, z, b) in enumerate(zip(first.tolist(), last.tolist(), best_at.tolist()))]
        for region in regions[:-1]:
            self._write_region(region)
        self.region = regions[-1]

    def _write_region(self, region: list[Any]) -> None:
        start, end, best, summit, strand = region
        d = self.delimiter
        line = d.join([self.chrom, str(start), str(end), cell(self.class_name, d), str(int(round(1000 * best))),
                       str(_STRANDS[strand + 1]), str(summit), str(summit + 1)]) + "\n"
        self.parts.append(line.encode())
        self.regions += 1

    def finish(self) -> None:
        if self.kind == "bed":
            if self.region is not None:
                self._write_region(self.region)
                self.region = None
        elif self.kind != "bigwig":
            self._format()

    def text(self) -> str:
        return b"".join(self.parts).decode()

    def bigwig_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not self.pending:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, np.zeros(0)
        return tuple(np.concatenate(column) for column in zip(*self.pending))  # type: ignore[return-value]


class BigWigWriter:
    """A bigWig written as targets finish, under a temporary name renamed onto ``path`` on success."""

    def __init__(self, path: Path, header: Sequence[tuple[str, int]]) -> None:
        self.path, self.header = Path(path), list(header)
        self.temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        self.bw: Any = None

    def __enter__(self) -> "BigWigWriter":
        import pyBigWig
        self.bw = pyBigWig.open(str(self.temporary), "w")
        if self.bw is None:
            raise UserInputError(f"{self.path}: cannot write a bigWig file there")
        try:
            self.bw.addHeader(self.header, maxZooms=10)
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return self

    def add(self, chrom: str, tiles: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        """Add one target's tiles, in fixed-size chunks."""
        starts, ends, values = tiles
        for first in range(0, len(starts), _BIGWIG_CHUNK):
            cut = slice(first, first + _BIGWIG_CHUNK)
            self.bw.addEntries([chrom] * len(starts[cut]), np.ascontiguousarray(starts[cut], dtype=np.int64),
                               ends=np.ascontiguousarray(ends[cut], dtype=np.int64),
                               values=np.ascontiguousarray(values[cut], dtype=np.float64))

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        try:
            if self.bw is not None:
                self.bw.close()
                self.bw = None
            if kind is None:
                os.replace(self.temporary, self.path)
        finally:
            if self.temporary.exists():
                self.temporary.unlink()


def write_bigwig(path: Path, header: Sequence[tuple[str, int]],
                 chunks: Iterator[tuple[str, tuple[np.ndarray, np.ndarray, np.ndarray]]]) -> None:
    """Write the bigWig ``path`` from each target's ``(chrom, tiles)`` atomically (:class:`BigWigWriter`)."""
    with BigWigWriter(path, header) as bw:
        for chrom, tiles in chunks:
            bw.add(chrom, tiles)


def check_writable(path: Path) -> None:
    """Create ``path``'s folder if missing and check that a file can be written there (a probe file)."""
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".{path.name}.{os.getpid()}.probe"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise UserInputError(f"{path}: cannot write here ({exc.strerror or exc})") from None
    if path.is_dir():
        raise UserInputError(f"{path}: is a folder; give a file name for the scan's output")


def fresh_folder(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)


def save_part(folder: Path, index: int, kind: str, out: TargetOutput) -> None:
    """One target's output as a part file of a sharded scan (text, or the bigWig tiles as ``.npz``)."""
    name = folder / f"{index:08d}"
    if kind == "bigwig":
        starts, ends, values = out.bigwig_arrays()
        np.savez(f"{name}.npz", starts=starts, ends=ends, values=values)
    else:
        Path(f"{name}.txt").write_bytes(b"".join(out.parts))


def merge_parts(folder: Path, targets: Sequence[Any], header: Sequence[tuple[str, int]], output: Path, kind: str,
                text_head: str) -> None:
    """Write ``output`` from the part files of every target, in genome order; then delete the parts."""
    try:
        if kind == "bigwig":
            def chunks() -> Iterator[tuple[str, tuple]]:
                for target in targets:
                    with np.load(folder / f"{target.index:08d}.npz") as saved:
                        yield target.chrom, (saved["starts"], saved["ends"], saved["values"])

            write_bigwig(output, header, chunks())
            return
        with atomic_write(output, newline="") as handle:
            handle.write(text_head)
            for target in targets:
                handle.write((folder / f"{target.index:08d}.txt").read_bytes().decode())
    finally:
        shutil.rmtree(folder, ignore_errors=True)
