"""Genome scan: score sliding windows of long sequences (regions, chromosomes) with a promoter model.

The FASTA is read through a pyfaidx index (``FILE.fai``, built beside the file, or in a temporary folder when
that folder is not writable), one block of windows at a time, chromosome by chromosome, so memory does not
grow with the sequence length. Plain FASTA or bgzip-compressed FASTA (``bgzip``, not ``gzip``).

What is scanned (:func:`scan_targets`): every sequence, only some (``chroms``) or only the intervals of a BED file
(``regions``, merged where they overlap; each scanned like a sequence of its own, in chromosome coordinates).

Windows (:class:`WindowGrid`): ``[0, W), [S, S + W), ...`` while they fit, plus a last window ``[L - W, L)``
so the end of every sequence is covered; a sequence shorter than ``W`` is one window of its own length.
Windows made only of N are skipped (no output row): they carry no sequence to score. Letter case is ignored.

The scan is a pipeline: a reader thread tokenises one block of the FASTA per batch (one numpy table lookup) and
cuts the batch's windows as strided views of it; the model runs in the calling thread; a writer thread formats
the rows. Under ``torchrun`` each process scans its share of the targets (:func:`shard_targets`, balanced by
length) into part files and the first process writes the output from them in genome order: the same bytes as one
process (at the same threads per process).

Output formats (by the output's extension; coordinates 0-based, half-open):

- ``.csv`` / ``.tsv``: ``chrom,start,end,probability``, one row per scored window (its own coordinates).
- ``.bedGraph``: a ``track type=bedGraph`` line, then ``chrom start end score`` rows that tile each sequence
  without overlaps: each base gets the score of the window whose centre is nearest (with stride = window the
  rows are the windows), so the file converts to bigWig as is.
- ``.bw`` / ``.bigWig``: the bedGraph's tiles as a bigWig track (pyBigWig).
- ``.bed``: regions scoring ``>= threshold``: overlapping or touching windows at or above the threshold are merged
  into one region, BED8 ``chrom start end name score strand thickStart thickEnd``: name = the scored class, score =
  1000 × the region's highest probability (rounded), strand = the strand scoring higher in that best window (``+``
  when one strand is scored, ``.`` on a tie), thickStart/thickEnd = the summit, the best window's centre base.
"""
from __future__ import annotations

import gzip
import json
import os
import queue
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pyfaidx

from bioattn.data.dna import N_ID, encode
from bioattn.errors import UserInputError
from bioattn.io import atomic_write
from bioattn.models.promoter import PromoterClassifier
from bioattn.progress import progress_bar

SCAN_FORMATS = {".csv": "csv", ".tsv": "csv", ".bedgraph": "bedgraph", ".bed": "bed", ".bw": "bigwig",
                ".bigwig": "bigwig"}


def scan_format(path: str | os.PathLike) -> str:
    """``csv``, ``bedgraph``, ``bigwig`` or ``bed`` from the output's extension (any case)."""
    suffix = Path(path).suffix.lower()
    if suffix not in SCAN_FORMATS:
        raise UserInputError(f"{path}: unknown output extension {suffix or '(none)'!r}; a genome scan writes "
                             f".bedGraph, .bw (.bigWig), .bed or .csv (.tsv)")
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


# ---------------------------------------------------------------------------------------------------------------
# What to scan: targets (whole sequences, --chrom, --regions BED) and their share per process


@dataclass(frozen=True)
class ScanTarget:
    """One stretch to scan: ``[start, end)`` of sequence ``chrom`` (``chrom_length`` nt), in genome order ``index``."""

    index: int
    chrom: str
    start: int
    end: int
    chrom_length: int

    @property
    def length(self) -> int:
        return self.end - self.start


def read_regions(path: Path, lengths: dict[str, int]) -> dict[str, list[tuple[int, int]]]:
    """Intervals of a BED file (first three columns; ``track``/``browser``/``#`` lines skipped) per sequence, sorted,
    overlapping or touching ones merged. A sequence missing from ``lengths`` (the FASTA), a malformed line or an
    interval beyond its sequence's end is a :class:`UserInputError` naming the file and line."""
    if not path.is_file():
        raise UserInputError(f"{path}: file not found" if not path.exists() else f"{path}: is not a file")
    found: dict[str, list[tuple[int, int]]] = {}
    with open(path) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip() or line.startswith(("#", "track", "browser")):
                continue
            fields = line.rstrip("\n").split("\t") if "\t" in line else line.split()
            where = f"{path}: line {number}"
            if len(fields) < 3:
                raise UserInputError(f"{where}: a BED line needs chrom, start and end, got {line.strip()!r}")
            chrom = fields[0]
            try:
                start, end = int(fields[1]), int(fields[2])
            except ValueError:
                raise UserInputError(f"{where}: start and end must be integers, got {fields[1]!r} and {fields[2]!r}") from None
            if chrom not in lengths:
                raise UserInputError(f"{where}: sequence {chrom!r} is not in the FASTA")
            if not 0 <= start < end <= lengths[chrom]:
                raise UserInputError(f"{where}: interval {start}-{end} is not within {chrom} (0-{lengths[chrom]}, "
                                     f"0-based half-open, start < end)")
            found.setdefault(chrom, []).append((start, end))
    if not found:
        raise UserInputError(f"{path}: no intervals (a BED file of chrom, start, end lines)")
    merged: dict[str, list[tuple[int, int]]] = {}
    for chrom, intervals in found.items():
        out: list[list[int]] = []
        for start, end in sorted(intervals):
            if out and start <= out[-1][1]:
                out[-1][1] = max(out[-1][1], end)
            else:
                out.append([start, end])
        merged[chrom] = [(a, b) for a, b in out]
    return merged


def scan_targets(lengths: dict[str, int], *, chroms: Sequence[str] | None = None,
                 regions: dict[str, list[tuple[int, int]]] | None = None) -> list[ScanTarget]:
    """The stretches to scan in genome order (the FASTA's sequence order, then position): every sequence of
    ``lengths`` (name -> nt, in FASTA order), only ``chroms``, only ``regions``, or ``regions`` on ``chroms``."""
    if chroms is not None:
        missing = [name for name in chroms if name not in lengths]
        if missing:
            raise UserInputError(f"--chrom {missing[0]!r} is not a sequence of the FASTA (it has "
                                 f"{', '.join(list(lengths)[:5])}{', ...' if len(lengths) > 5 else ''})")
    chosen = set(chroms) if chroms is not None else None
    targets: list[ScanTarget] = []
    for chrom, length in lengths.items():
        if chosen is not None and chrom not in chosen:
            continue
        spans = regions.get(chrom, []) if regions is not None else [(0, length)]
        for start, end in spans:
            targets.append(ScanTarget(len(targets), chrom, start, end, length))
    if not targets:
        raise UserInputError("nothing to scan: no --regions interval lies on the --chrom sequences")
    return targets


def shard_targets(targets: Sequence[ScanTarget], ranks: int, rank: int, window: int, stride: int) -> list[ScanTarget]:
    """Rank ``rank``'s share of ``targets`` among ``ranks`` processes, balanced by windows (longest first to the
    least loaded rank; ties to the lowest rank), in genome order. Every rank computes the same assignment."""
    load = [0] * ranks
    owner: dict[int, int] = {}
    for target in sorted(targets, key=lambda t: (-t.length, t.index)):
        chosen = min(range(ranks), key=lambda r: (load[r], r))
        owner[target.index] = chosen
        load[chosen] += len(WindowGrid(target.length, window, stride))
    return [target for target in targets if owner[target.index] == rank]


# ---------------------------------------------------------------------------------------------------------------
# Windows of a target, vectorised


def window_spans(grid: WindowGrid, first: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, ends)`` int64 of windows ``first .. stop - 1`` of ``grid`` (see :meth:`WindowGrid.span`)."""
    index = np.arange(first, stop, dtype=np.int64)
    if grid.length <= grid.window:
        return np.zeros_like(index), np.full_like(index, grid.length)
    starts = index * grid.stride
    starts[index == len(grid) - 1] = grid.length - grid.window
    return starts, starts + grid.window


def window_tiles(grid: WindowGrid, first: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, ends)`` of the tiles of windows ``first .. stop - 1`` (see :meth:`WindowGrid.tile`)."""
    index = np.arange(first, stop, dtype=np.int64)
    if len(grid) == 1:
        return np.zeros_like(index), np.full_like(index, grid.length)
    lo, hi = max(first - 1, 0), min(stop + 1, len(grid))
    starts, ends = window_spans(grid, lo, hi)
    boundary = (starts[:-1] + ends[:-1] + starts[1:] + ends[1:]) // 4  # boundary[k]: between windows lo+k, lo+k+1

    def after(i: np.ndarray) -> np.ndarray:
        return boundary[np.clip(i - lo, 0, len(boundary) - 1)]

    tile_starts = np.where(index == 0, 0, after(index - 1))
    tile_ends = np.where(index == len(grid) - 1, grid.length, after(index))
    return tile_starts, tile_ends


@dataclass
class _Batch:
    """Windows of one target ready for the model: the kept (not only-N) windows' coordinates in the sequence and
    token ids ``(B, W)``; ``windows``: how many windows the batch covered, kept or not; ``last``: the target's last."""

    target: ScanTarget
    starts: np.ndarray
    ends: np.ndarray
    tile_starts: np.ndarray
    tile_ends: np.ndarray
    ids: Any  # torch.Tensor (B, W) int64
    windows: int
    last: bool


def _target_batches(fasta: pyfaidx.Fasta, path: Path, target: ScanTarget, window: int, stride: int,
                    batch_size: int) -> Iterator[_Batch]:
    """``target``'s windows in batches of ``batch_size``: one FASTA read and one vectorised tokenising per batch."""
    import torch

    grid = WindowGrid(target.length, window, stride)
    total = len(grid)
    record = fasta[target.chrom]
    for first in range(0, total, batch_size):
        stop = min(first + batch_size, total)
        starts, ends = window_spans(grid, first, stop)
        tile_starts, tile_ends = window_tiles(grid, first, stop)
        block_start, block_end = int(starts[0]), int(ends[-1])
        offset = target.start + block_start
        tokens = encode(record[offset : target.start + block_end], record=f"record {target.chrom!r}", source=path,
                        offset=offset)
        width = block_end - block_start if grid.length <= window else window
        ids = np.lib.stride_tricks.sliding_window_view(tokens, width)[starts - block_start]
        keep = ~(ids == N_ID).all(axis=1)
        if not keep.all():
            ids, starts, ends, tile_starts, tile_ends = (a[keep] for a in (ids, starts, ends, tile_starts, tile_ends))
        yield _Batch(target, starts + target.start, ends + target.start, tile_starts + target.start,
                     tile_ends + target.start, torch.from_numpy(np.ascontiguousarray(ids)), stop - first, stop == total)


# ---------------------------------------------------------------------------------------------------------------
# Output: text formats (csv/tsv, bedGraph, BED) and bigWig, one chunk per target so shards merge byte for byte


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


def _text_header(kind: str, class_name: str, delimiter: str) -> str:
    if kind == "csv":
        return delimiter.join(["chrom", "start", "end", "probability"]) + "\n"
    if kind == "bedgraph":
        return f"track type=bedGraph name=bioattn_p_{class_name.replace(' ', '_')}\n"
    return ""


def _cell(text: str, delimiter: str) -> str:
    """A text cell as the csv module writes it (quoted when it holds the delimiter, a quote or a line break)."""
    if any(c in text for c in (delimiter, '"', "\n", "\r")):
        return '"' + text.replace('"', '""') + '"'
    return text


class _TargetOutput:
    """The output of one target, fed batch by batch: text lines (csv/tsv, bedGraph, BED) or bigWig arrays."""

    def __init__(self, target: ScanTarget, kind: str, delimiter: str, threshold: float, class_name: str) -> None:
        self.target, self.kind, self.threshold, self.class_name = target, kind, threshold, class_name
        self.delimiter = delimiter
        self.chrom = _cell(target.chrom, delimiter)
        self.parts: list[str] = []
        self.arrays: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.region: list[Any] | None = None  # [start, end, best probability, summit, strand]
        self.above = 0
        self.regions = 0

    def add(self, batch: _Batch, probs: np.ndarray, strands: np.ndarray) -> None:
        """``probs (B,)`` float64: the scored class's probability per kept window; ``strands (B,)``: '+', '-' or '.'."""
        above = probs >= self.threshold
        self.above += int(above.sum())
        d, c = self.delimiter, self.chrom
        if self.kind == "csv":
            self.parts.append("".join(f"{c}{d}{s}{d}{e}{d}{p:.6g}\n" for s, e, p in
                                      zip(batch.starts.tolist(), batch.ends.tolist(), probs.tolist())))
        elif self.kind == "bedgraph":
            self.parts.append("".join(f"{c}{d}{s}{d}{e}{d}{p:.6g}\n" for s, e, p in
                                      zip(batch.tile_starts.tolist(), batch.tile_ends.tolist(), probs.tolist())))
        elif self.kind == "bigwig":
            self.arrays.append((batch.tile_starts, batch.tile_ends, probs))
        else:
            for k in np.flatnonzero(above).tolist():
                self._bed_window(int(batch.starts[k]), int(batch.ends[k]), float(probs[k]), str(strands[k]))

    def _bed_window(self, start: int, end: int, probability: float, strand: str) -> None:
        summit = (start + end) // 2
        if self.region is not None and start <= self.region[1]:
            self.region[1] = max(self.region[1], end)
            if probability > self.region[2]:
                self.region[2:] = [probability, summit, strand]
        else:
            self._flush_region()
            self.region = [start, end, probability, summit, strand]

    def _flush_region(self) -> None:
        if self.region is not None:
            start, end, best, summit, strand = self.region
            d = self.delimiter
            self.parts.append(d.join([self.chrom, str(start), str(end), _cell(self.class_name, d),
                                      str(int(round(1000 * best))), strand, str(summit), str(summit + 1)]) + "\n")
            self.regions += 1
            self.region = None

    def finish(self) -> None:
        self._flush_region()

    def text(self) -> str:
        return "".join(self.parts)

    def bigwig_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not self.arrays:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, np.zeros(0)
        return tuple(np.concatenate(column) for column in zip(*self.arrays))  # type: ignore[return-value]


_BIGWIG_CHUNK = 1 << 16


def _add_bigwig_entries(bw: Any, chrom: str, starts: np.ndarray, ends: np.ndarray, values: np.ndarray) -> None:
    """Add one target's tiles to an open pyBigWig file, in fixed-size chunks (the same calls in every process)."""
    for first in range(0, len(starts), _BIGWIG_CHUNK):
        cut = slice(first, first + _BIGWIG_CHUNK)
        bw.addEntries([chrom] * len(starts[cut]), starts[cut].tolist(), ends=ends[cut].tolist(),
                      values=values[cut].astype(float).tolist())


def _write_bigwig(path: Path, targets: Sequence[ScanTarget], chunks: Iterator[tuple[ScanTarget, tuple]]) -> None:
    """Write the bigWig ``path`` atomically (a temporary name in the same folder, then renamed)."""
    import pyBigWig

    header, seen = [], set()
    for target in targets:
        if target.chrom not in seen:
            seen.add(target.chrom)
            header.append((target.chrom, target.chrom_length))
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        bw = pyBigWig.open(str(temporary), "w")
        if bw is None:
            raise UserInputError(f"{path}: cannot write a bigWig file there")
        try:
            bw.addHeader(header, maxZooms=10)
            for target, (starts, ends, values) in chunks:
                _add_bigwig_entries(bw, target.chrom, starts, ends, values)
        finally:
            bw.close()
        os.replace(temporary, path)
    finally:
        if temporary.exists():
            temporary.unlink()


# ---------------------------------------------------------------------------------------------------------------
# The pipeline: a reader thread (FASTA -> token batches), the model in the calling thread, a writer thread


def default_batch_size(device: Any) -> int:
    """Windows per forward pass of a scan on ``device`` (a ``torch.device``): 4096 on a GPU, 512 on a CPU."""
    return 4096 if getattr(device, "type", str(device)) == "cuda" else 512


_DONE = object()


class _Worker(threading.Thread):
    """A daemon thread running ``fn``; an exception in it is kept and raised again by :meth:`check`."""

    def __init__(self, fn: Callable[[], None], name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.fn, self.error = fn, None

    def run(self) -> None:
        try:
            self.fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
            self.error = exc

    def check(self) -> None:
        if self.error is not None:
            raise self.error


def _put(q: queue.Queue, item: Any, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            q.put(item, timeout=0.1)
            return
        except queue.Full:
            continue


def _score(model: PromoterClassifier, ids: Any, device: Any, rc_average: bool, class_index: int,
           batch_size: int, pad: bool) -> tuple[np.ndarray, np.ndarray]:
    """The scored class's probability ``(B,)`` float64 and each window's strand (``+``, ``-``: the strand scoring
    higher when both are scored, ``.`` on a tie) for ``ids (B, W)``: the numbers of
    :meth:`PromoterClassifier.predict_proba`. ``pad``: run a full ``batch_size`` batch (static shapes)."""
    import torch

    from bioattn.data.dna import reverse_complement_ids

    rows = ids.shape[0]
    if pad and rows < batch_size:
        ids = torch.cat([ids, ids[:1].expand(batch_size - rows, -1)])
    ids = ids.to(device, non_blocking=True)

    def activate(logits: Any) -> Any:
        probs = torch.sigmoid(logits) if model.binary else torch.softmax(logits, dim=-1)
        return probs.double() if model.binary else probs[:, class_index].double()

    def run(tokens: Any) -> Any:
        if not pad:
            return model(tokens)
        torch.compiler.cudagraph_mark_step_begin()  # a compiled model's CUDA-graph outputs are reused by its next run
        return model(tokens).clone()

    forward = run(ids)
    if not rc_average:
        probs = activate(forward)
        if model.binary and class_index == 0:
            probs = 1.0 - probs
        return probs[:rows].cpu().numpy(), np.full(rows, "+")
    reverse = run(reverse_complement_ids(ids))
    both = torch.stack([activate(forward), activate(reverse), activate((forward + reverse) / 2)])[:, :rows].cpu().numpy()
    if model.binary and class_index == 0:
        both = 1.0 - both
    strands = np.where(both[0] > both[1], "+", np.where(both[0] < both[1], "-", "."))
    return both[2], strands


def _scan_targets(model: PromoterClassifier, fasta: pyfaidx.Fasta, path: Path, targets: Sequence[ScanTarget], *,
                  window: int, stride: int, batch_size: int, rc_average: bool, class_index: int, kind: str,
                  delimiter: str, emit: Callable[[_TargetOutput], None], summary: ScanSummary, compiled: bool) -> None:
    """Scan ``targets``; ``emit`` receives each finished target's output, in order, from the writer thread."""
    import torch

    device = next(model.parameters()).device
    stop = threading.Event()
    batches: queue.Queue = queue.Queue(maxsize=8)
    scored: queue.Queue = queue.Queue(maxsize=8)

    def read() -> None:
        for target in targets:
            for batch in _target_batches(fasta, path, target, window, stride, batch_size):
                if device.type == "cuda":
                    batch.ids = batch.ids.pin_memory()
                _put(batches, batch, stop)
                if stop.is_set():
                    return
        _put(batches, _DONE, stop)

    def write() -> None:
        outputs: dict[int, _TargetOutput] = {}
        while True:
            item = scored.get()
            if item is _DONE:
                return
            batch, probs, strands = item
            out = outputs.get(batch.target.index)
            if out is None:
                out = outputs[batch.target.index] = _TargetOutput(batch.target, kind, delimiter, model.threshold,
                                                                  model.class_names[class_index])
            out.add(batch, probs, strands)
            summary.windows += len(probs)
            summary.skipped_n_only += batch.windows - len(probs)
            if batch.last:
                out.finish()
                summary.sequences += 1
                summary.above_threshold += out.above
                summary.regions += out.regions
                emit(outputs.pop(batch.target.index))

    reader, writer = _Worker(read, "bioattn-scan-reader"), _Worker(write, "bioattn-scan-writer")
    total = sum(len(WindowGrid(t.length, window, stride)) for t in targets)
    reader.start()
    writer.start()
    was_training = model.training
    model.eval()
    try:
        with progress_bar(total=total, desc="scan", unit="window", leave=False) as bar, torch.inference_mode():
            while True:
                try:
                    batch = batches.get(timeout=0.5)
                except queue.Empty:
                    reader.check()
                    writer.check()
                    continue
                if batch is _DONE:
                    break
                if len(batch.ids):
                    probs, strands = _score(model, batch.ids, device, rc_average, class_index, batch_size,
                                            pad=compiled)
                else:
                    probs, strands = np.zeros(0), np.zeros(0, dtype="<U1")
                while True:
                    try:
                        scored.put((batch, probs, strands), timeout=0.5)
                        break
                    except queue.Full:
                        writer.check()
                bar.update(batch.windows)
        scored.put(_DONE)
        writer.join()
        writer.check()
    finally:
        stop.set()
        if writer.is_alive():
            _put(scored, _DONE, threading.Event())
        reader.join(timeout=5)
        model.train(was_training)
    reader.check()


def _fasta_lengths(fasta: pyfaidx.Fasta) -> dict[str, int]:
    return {name: len(fasta[name]) for name in fasta.keys()}


def scan_genome(
    model: PromoterClassifier, path: Path, output: Path, *, window: int, stride: int, class_index: int,
    batch_size: int | None = None, rc_average: bool | None = None, chroms: Sequence[str] | None = None,
    regions: Path | None = None, compile_model: bool = False,
) -> ScanSummary:
    """Score every window of the FASTA ``path`` (or of ``chroms`` / the ``regions`` BED); write ``output``.

    ``class_index``: which class's probability is the score (two classes: normally 1). BED keeps windows whose
    score is ``>= model.threshold``. ``batch_size``: windows per forward pass (default
    :func:`default_batch_size` for the model's device). ``compile_model``: run the model through
    ``torch.compile`` (on a GPU with CUDA graphs; batches padded to ``batch_size``). Under ``torchrun`` each process
    scans its share of the targets (:func:`shard_targets`) and the first process writes ``output`` from the shares,
    in genome order: the same bytes as one process at the same threads per process. Returns what was done (totals
    over the processes).
    """
    from bioattn import distributed

    kind = scan_format(output)
    if not 1 <= window <= model.max_len:
        raise UserInputError(f"--window must be between 1 and the model's max_len ({model.max_len}), got {window}")
    if stride < 1:
        raise UserInputError(f"--stride must be >= 1, got {stride}")
    if batch_size is not None and batch_size < 1:
        raise UserInputError(f"--batch-size must be >= 1, got {batch_size}")
    if kind == "bigwig":
        import pyBigWig  # noqa: F401 - fail before scanning when it is missing
    device = next(model.parameters()).device
    batch_size = batch_size or default_batch_size(device)
    rc = model.rc_average if rc_average is None else rc_average
    delimiter = "," if kind == "csv" and Path(output).suffix.lower() == ".csv" else "\t"
    class_name = model.class_names[class_index]
    distributed.init_distributed()
    ranks, rank = distributed.world_size(), distributed.rank()
    scorer = model
    if compile_model:
        import torch

        scorer = torch.compile(model, mode="reduce-overhead" if device.type == "cuda" else None, dynamic=False)
    summary = ScanSummary()
    parts = Path(output).parent / f".{Path(output).name}.parts"
    with tempfile.TemporaryDirectory(prefix="bioattn-faidx-") as folder:
        error: str | None = None
        targets: list[ScanTarget] = []
        try:
            with open_indexed_fasta(path, folder) as fasta:
                lengths = _fasta_lengths(fasta)
                wanted = read_regions(regions, lengths) if regions is not None else None
                targets = scan_targets(lengths, chroms=chroms, regions=wanted)
                mine = shard_targets(targets, ranks, rank, window, stride) if ranks > 1 else targets
                common = dict(window=window, stride=stride, batch_size=batch_size, rc_average=rc, class_index=class_index,
                              kind=kind, delimiter=delimiter, summary=summary, compiled=compile_model)
                if ranks == 1:
                    _scan_to_output(scorer, fasta, path, targets, output, kind, delimiter, class_name, common)
                    return summary
                distributed.run_on_main(lambda: _fresh_folder(parts))
                _scan_targets(scorer, fasta, path, mine, emit=lambda out: _save_part(parts, kind, out), **common)
        except UserInputError as exc:
            if ranks == 1:
                raise
            error = str(exc)
        errors = distributed.gather_bytes(json.dumps(error).encode())  # never empty: "null" when fine
        first = distributed.broadcast_json(next((m for m in map(json.loads, errors) if m), None) if errors else None)
        if first is not None:
            distributed.run_on_main(lambda: shutil.rmtree(parts, ignore_errors=True))
            raise UserInputError(first)
        distributed.run_on_main(lambda: _merge_parts(parts, targets, output, kind, delimiter, class_name))
    import torch

    totals = distributed.all_reduce_sum(torch.tensor(summary.as_list(), dtype=torch.float64))
    return ScanSummary(*(int(v) for v in totals.tolist()))


def _scan_to_output(model: PromoterClassifier, fasta: pyfaidx.Fasta, path: Path, targets: Sequence[ScanTarget],
                    output: Path, kind: str, delimiter: str, class_name: str, common: dict[str, Any]) -> None:
    """One process: write each target's output as it finishes (text) or into the bigWig (in fixed chunks)."""
    if kind == "bigwig":
        outputs: list[tuple[ScanTarget, tuple]] = []
        _scan_targets(model, fasta, path, targets, emit=lambda out: outputs.append((out.target, out.bigwig_arrays())),
                      **common)
        _write_bigwig(output, targets, iter(outputs))
        return
    with atomic_write(output, newline="") as handle:
        handle.write(_text_header(kind, class_name, delimiter))
        _scan_targets(model, fasta, path, targets, emit=lambda out: handle.write(out.text()), **common)


def _fresh_folder(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)


def _save_part(folder: Path, kind: str, out: _TargetOutput) -> None:
    """One target's output as a part file of a sharded scan (text, or the bigWig tiles as ``.npz``)."""
    name = folder / f"{out.target.index:08d}"
    if kind == "bigwig":
        starts, ends, values = out.bigwig_arrays()
        np.savez(f"{name}.npz", starts=starts, ends=ends, values=values)
    else:
        Path(f"{name}.txt").write_text(out.text(), newline="")


def _merge_parts(folder: Path, targets: Sequence[ScanTarget], output: Path, kind: str, delimiter: str,
                 class_name: str) -> None:
    """Write ``output`` from the part files of every target, in genome order; then delete the parts."""
    try:
        if kind == "bigwig":
            def chunks() -> Iterator[tuple[ScanTarget, tuple]]:
                for target in targets:
                    with np.load(folder / f"{target.index:08d}.npz") as saved:
                        yield target, (saved["starts"], saved["ends"], saved["values"])

            _write_bigwig(output, targets, chunks())
            return
        with atomic_write(output, newline="") as handle:
            handle.write(_text_header(kind, class_name, delimiter))
            for target in targets:
                with open(folder / f"{target.index:08d}.txt", newline="") as part:
                    shutil.copyfileobj(part, handle)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
