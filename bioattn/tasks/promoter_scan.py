"""Genome scan: score sliding windows of long sequences (regions, chromosomes) with a promoter model.

The FASTA is read through a pyfaidx index (``FILE.fai``, built beside the file, or in a temporary folder when
that folder is not writable), one block of windows at a time, chromosome by chromosome, so memory does not
grow with the sequence length. Plain FASTA or bgzip-compressed FASTA (``bgzip``, not ``gzip``).

Windows (:class:`WindowGrid`): ``[0, W), [S, S + W), ...`` while they fit, plus a last window ``[L - W, L)``
so the end of every sequence is covered; a sequence shorter than ``W`` is one window of its own length.
Windows made only of N are skipped (no output row): they carry no sequence to score. Letter case is ignored.

Output formats (by the output's extension; coordinates 0-based, half-open):

- ``.csv`` / ``.tsv``: ``chrom,start,end,probability``, one row per scored window (its own coordinates).
- ``.bedGraph``: a ``track type=bedGraph`` line, then ``chrom start end score`` rows that tile each sequence
  without overlaps: each base gets the score of the window whose centre is nearest (with stride = window the
  rows are the windows), so the file converts to bigWig as is.
- ``.bed``: regions scoring ``>= threshold``: overlapping or touching windows at or above the threshold are merged
  into one region (``chrom start end name score``; name = the scored class, score = 1000 × the region's highest
  probability, rounded).
"""
from __future__ import annotations

import gzip
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pyfaidx

from bioattn.data.dna import N_ID, encode
from bioattn.errors import UserInputError
from bioattn.io import table_writer
from bioattn.models.promoter import PromoterClassifier
from bioattn.progress import progress_bar

SCAN_FORMATS = {".csv": "csv", ".tsv": "csv", ".bedgraph": "bedgraph", ".bed": "bed"}


def scan_format(path: str | os.PathLike) -> str:
    """``csv``, ``bedgraph`` or ``bed`` from the output's extension (any case)."""
    suffix = Path(path).suffix.lower()
    if suffix not in SCAN_FORMATS:
        raise UserInputError(f"{path}: unknown output extension {suffix or '(none)'!r}; a genome scan writes "
                             f".bedGraph, .bed or .csv (.tsv)")
    return SCAN_FORMATS[suffix]


@dataclass(frozen=True)
class WindowGrid:
    """The windows of one sequence of ``length`` nt: ``window`` wide, every ``stride`` nt, end-aligned last one."""

    length: int
    window: int
    stride: int

    def __len__(self) -> int:
        if self.length <= self.window:
            return 1
        steps, rest = divmod(self.length - self.window, self.stride)
        return steps + 1 + (1 if rest else 0)

    def span(self, index: int) -> tuple[int, int]:
        """``(start, end)`` of window ``index``."""
        if self.length <= self.window:
            return 0, self.length
        start = index * self.stride if index < len(self) - 1 else self.length - self.window
        return start, start + self.window

    def tile(self, index: int) -> tuple[int, int]:
        """The bases whose nearest window centre is window ``index``'s: these tiles partition ``[0, length)``."""
        start = 0 if index == 0 else self._boundary(index - 1)
        end = self.length if index == len(self) - 1 else self._boundary(index)
        return start, end

    def _boundary(self, index: int) -> int:
        """First base past the midpoint between the centres of windows ``index`` and ``index + 1``."""
        (a, b), (c, d) = self.span(index), self.span(index + 1)
        return (a + b + c + d) // 4


@dataclass
class ScanSummary:
    """What a scan did: sequences, windows scored and skipped (only N), windows at/above the threshold, BED regions."""

    sequences: int = 0
    windows: int = 0
    skipped_n_only: int = 0
    above_threshold: int = 0
    regions: int = 0


class _ScanSink:
    """Turns scored windows into rows of the chosen format (see the module docstring)."""

    def __init__(self, write_row: Callable[[Sequence[Any]], None], kind: str, threshold: float, class_name: str,
                 summary: ScanSummary) -> None:
        self.write_row, self.kind, self.threshold, self.class_name, self.summary = write_row, kind, threshold, class_name, summary
        self.region: list[Any] | None = None  # [chrom, start, end, best probability] of the BED region being merged
        if kind == "bedgraph":
            write_row([f"track type=bedGraph name=bioattn_p_{class_name.replace(' ', '_')}"])

    def window(self, chrom: str, span: tuple[int, int], tile: tuple[int, int], probability: float) -> None:
        above = probability >= self.threshold
        self.summary.above_threshold += int(above)
        if self.kind == "csv":
            self.write_row([chrom, *span, probability])
        elif self.kind == "bedgraph":
            self.write_row([chrom, *tile, probability])
        elif above:
            if self.region is not None and self.region[0] == chrom and span[0] <= self.region[2]:
                self.region[2] = max(self.region[2], span[1])
                self.region[3] = max(self.region[3], probability)
            else:
                self.flush()
                self.region = [chrom, *span, probability]

    def flush(self) -> None:
        """Write the BED region being merged, if any."""
        if self.region is not None:
            chrom, start, end, best = self.region
            self.write_row([chrom, start, end, self.class_name, int(round(1000 * best))])
            self.summary.regions += 1
            self.region = None


def _check_fasta(path: Path) -> None:
    if not path.is_file():
        raise UserInputError(f"{path}: file not found" if not path.exists() else f"{path}: is not a file")
    with open(path, "rb") as handle:
        head = handle.read(4)
    if head[:2] == b"\x1f\x8b":
        with gzip.open(path, "rb") as handle:
            first = handle.read(1)
        if len(head) < 4 or not head[3] & 0x04:  # the FEXTRA flag: bgzip sets it, plain gzip does not
            raise UserInputError(f"{path}: a genome scan reads plain FASTA or bgzip-compressed FASTA, not gzip; "
                                 f"recompress with 'gunzip {path.name} && bgzip {path.stem}'")
    else:
        first = head[:1]
    if first != b">":
        raise UserInputError(f"{path}: a genome scan (--window) needs a FASTA file whose first line is a '>' header")


def _index_location(path: Path, folder: str) -> dict[str, str]:
    """pyfaidx index file names: beside ``path`` when that works, else in ``folder`` (a temporary folder)."""
    fai = Path(f"{path}.fai")
    fresh = fai.exists() and fai.stat().st_mtime >= path.stat().st_mtime
    if fresh or os.access(path.parent, os.W_OK):
        return {}
    print(f"note: {path.parent} is not writable; indexing {path.name} in a temporary folder (rebuilt on every run)",
          file=sys.stderr)
    return {"indexname": str(Path(folder) / fai.name), "gzi_indexname": str(Path(folder) / f"{path.name}.gzi")}


def open_indexed_fasta(path: Path, folder: str) -> pyfaidx.Fasta:
    """Open ``path`` with pyfaidx (raw upper/lower-case text), building its index if needed."""
    _check_fasta(path)
    try:
        return pyfaidx.Fasta(str(path), as_raw=True, sequence_always_upper=True, **_index_location(path, folder))
    except (pyfaidx.FastaIndexingError, pyfaidx.UnsupportedCompressionFormat, ValueError, OSError) as exc:
        raise UserInputError(f"{path}: cannot index this FASTA ({str(exc).splitlines()[0]})") from exc


def _window_batches(fasta: pyfaidx.Fasta, path: Path, chrom: str, grid: WindowGrid,
                    batch_size: int) -> Iterator[tuple[list[int], list[np.ndarray]]]:
    """``(window indices, token arrays)`` per batch of windows; one read of the FASTA per batch."""
    for first in range(0, len(grid), batch_size):
        indices = list(range(first, min(first + batch_size, len(grid))))
        block_start, block_end = grid.span(indices[0])[0], grid.span(indices[-1])[1]
        block = encode(fasta[chrom][block_start:block_end], record=f"record {chrom!r}", source=path, offset=block_start)
        yield indices, [block[grid.span(i)[0] - block_start : grid.span(i)[1] - block_start] for i in indices]


def scan_genome(
    model: PromoterClassifier, path: Path, output: Path, *, window: int, stride: int, class_index: int,
    batch_size: int = 256, rc_average: bool | None = None,
) -> ScanSummary:
    """Score every window of every sequence of the FASTA ``path``; write ``output`` (format by extension).

    ``class_index``: which class's probability is the score (two classes: normally 1). BED keeps windows whose
    score is ``>= model.threshold``. Returns what was done.
    """
    kind = scan_format(output)
    if not 1 <= window <= model.max_len:
        raise UserInputError(f"--window must be between 1 and the model's max_len ({model.max_len}), got {window}")
    if stride < 1:
        raise UserInputError(f"--stride must be >= 1, got {stride}")
    summary = ScanSummary()
    class_name = model.class_names[class_index]
    header = ["chrom", "start", "end", "probability"] if kind == "csv" else None
    with tempfile.TemporaryDirectory(prefix="bioattn-faidx-") as folder, open_indexed_fasta(path, folder) as fasta, \
            table_writer(output, header) as write_row:
        sink = _ScanSink(write_row, kind, model.threshold, class_name, summary)
        for record in fasta:
            grid = WindowGrid(len(record), window, stride)
            summary.sequences += 1
            with progress_bar(total=len(grid), desc=f"scan {record.name}", unit="window", leave=False) as bar:
                for indices, tokens in _window_batches(fasta, path, record.name, grid, batch_size):
                    keep = [k for k, t in enumerate(tokens) if not (t == N_ID).all()]
                    summary.skipped_n_only += len(tokens) - len(keep)
                    probs = model.predict_tokens([tokens[k] for k in keep], batch_size=batch_size, rc_average=rc_average)
                    for k, value in zip(keep, model.class_probabilities(probs)[:, class_index]):
                        sink.window(record.name, grid.span(indices[k]), grid.tile(indices[k]), float(value))
                    summary.windows += len(keep)
                    bar.update(len(tokens))
            sink.flush()
    return summary
