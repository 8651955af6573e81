"""The windows of a genome scan (:class:`WindowGrid`) and the pipeline that scores them."""
from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from bioattn.data.dna import N_ID, encode
from bioattn.progress import progress_bar
from bioattn.tasks.device_feed import feed
from bioattn.tasks.promoter.tracks import ScanSummary, TargetOutput

#: Bases read and tokenised at once (rounded to whole batches of windows).
READ_BASES = 1 << 20
#: Windows the host handles as one batch: whole model batches, at most about ``HOST_TOKENS`` tokens per strand.
HOST_WINDOWS = 1 << 13
HOST_TOKENS = 1 << 20


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
        return (0 if index == 0 else self._boundary(index - 1),
                self.length if index == len(self) - 1 else self._boundary(index))

    def _boundary(self, index: int) -> int:
        """First base past the midpoint between the centres of windows ``index`` and ``index + 1``."""
        (a, b), (c, d) = self.span(index), self.span(index + 1)
        return (a + b + c + d) // 4


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

    return np.where(index == 0, 0, after(index - 1)), np.where(index == len(grid) - 1, grid.length, after(index))


_TABLES: dict[str, bytes] = {}


def _tables() -> tuple[bytes, bytes]:
    """``bytes.translate`` tables: the token of each byte (255: not a nucleotide letter) and each token's complement."""
    if not _TABLES:
        import torch

        from bioattn.data.dna import reverse_complement_ids

        table = np.full(256, 255, dtype=np.uint8)
        for byte in range(128):
            try:
                table[byte] = int(encode(chr(byte))[0])
            except Exception:  # noqa: BLE001 - not a letter encode() takes
                continue
        complement = np.arange(256, dtype=np.uint8)
        complement[: N_ID + 1] = reverse_complement_ids(torch.arange(N_ID + 1).reshape(-1, 1)).reshape(-1).numpy()
        _TABLES["encode"], _TABLES["complement"] = table.tobytes(), complement.tobytes()
    return _TABLES["encode"], _TABLES["complement"]


def tokenise(text: str, *, record: str, source: Path, offset: int) -> bytes:
    """Token ids of ``text`` as bytes (:func:`~bioattn.data.dna.encode`'s, and its error for a bad letter)."""
    table, _ = _tables()
    try:
        tokens = text.encode("ascii").translate(table)
    except UnicodeEncodeError:
        tokens = b"\xff"
    if not text or b"\xff" in tokens:
        encode(text.upper(), record=record, source=source, offset=offset)  # raises the error naming the letter
    return tokens


@dataclass
class WindowBatch:
    """The kept (not only-N) windows of one host batch, ready for the model."""

    target: ScanTarget
    starts: np.ndarray
    ends: np.ndarray
    tile_starts: np.ndarray
    tile_ends: np.ndarray
    ids: np.ndarray
    reverse: np.ndarray | None
    windows: int
    last: bool
    chunks: tuple[int, ...]


def _rows(windows: np.ndarray, first: np.ndarray, stride: int) -> np.ndarray:
    """Rows ``first`` of ``windows``: a strided view when evenly spaced ``stride`` apart, else a copy."""
    n = len(first)
    if n > 1 and abs(int(first[-1]) - int(first[0])) == (n - 1) * stride:
        if first[-1] > first[0]:
            return windows[int(first[0]) : int(first[-1]) + 1 : stride]
        return windows[int(first[-1]) : int(first[0]) + 1 : stride][::-1]
    return windows[first]


def target_batches(fasta: Any, path: Path, target: ScanTarget, window: int, stride: int, batch_size: int,
                   both_strands: bool) -> Iterator[WindowBatch]:
    """``target``'s windows in host batches of whole model batches of ``batch_size``, only-N windows dropped."""
    grid = WindowGrid(target.length, window, stride)
    total = len(grid)
    record = fasta[target.chrom]
    per_read = batch_size * max(1, READ_BASES // max(1, batch_size * stride))
    _, complement = _tables()
    for read_first in range(0, total, per_read):
        read_stop = min(read_first + per_read, total)
        starts, ends = window_spans(grid, read_first, read_stop)
        tile_starts, tile_ends = window_tiles(grid, read_first, read_stop)
        block_start, block_end = int(starts[0]), int(ends[-1])
        offset = target.start + block_start
        text = tokenise(record[offset : target.start + block_end], record=f"record {target.chrom!r}", source=path,
                        offset=offset)
        tokens = np.frombuffer(text, dtype=np.uint8)
        width = int(ends[0] - starts[0])
        unknown = tokens == N_ID
        if unknown.any():
            letters = np.concatenate([[0], np.cumsum(~unknown, dtype=np.int64)])
            keep = letters[ends - block_start] > letters[starts - block_start]
        else:
            keep = np.ones(len(starts), dtype=bool)
        forward = np.lib.stride_tricks.sliding_window_view(tokens, width)
        flipped = None
        if both_strands:  # window [s, s + W) of the block is [L - s - W, L - s) of its reverse complement
            flipped = np.lib.stride_tricks.sliding_window_view(
                np.frombuffer(text.translate(complement)[::-1], dtype=np.uint8), width)
        host = batch_size * max(1, min(HOST_WINDOWS, HOST_TOKENS // max(1, width)) // batch_size)
        for first in range(0, read_stop - read_first, host):
            cut = slice(first, min(first + host, read_stop - read_first))
            kept = keep[cut]
            rel = starts[cut][kept] - block_start
            chunks = np.add.reduceat(kept, np.arange(0, len(kept), batch_size), dtype=np.int64)
            yield WindowBatch(target, starts[cut][kept] + target.start, ends[cut][kept] + target.start,
                              tile_starts[cut][kept] + target.start, tile_ends[cut][kept] + target.start,
                              _rows(forward, rel, stride),
                              None if flipped is None else _rows(flipped, len(tokens) - width - rel, stride),
                              cut.stop - cut.start, read_first + cut.stop == total, tuple(chunks.tolist()))


def make_scorer(model: Any, class_index: int, batch_size: int, pad: bool, strands: bool) -> Callable[..., Any]:
    """``score(ids[, reverse])`` -> ``(B,)`` float64 probability of the class (strands averaged in logits); with
    ``strands`` ``(2, B)``, the strand code (+1 / -1 / 0 on a tie) second. ``pad``: full ``batch_size`` batches."""
    import torch
    def activate(logits: Any) -> Any:
        probs = torch.sigmoid(logits) if model.binary else torch.softmax(logits, dim=-1)
        probs = probs.double() if model.binary else probs[:, class_index].double()
        return 1.0 - probs if model.binary and class_index == 0 else probs

    def run(tokens: Any) -> Any:
        if not pad:
            return model(tokens)
        torch.compiler.cudagraph_mark_step_begin()  # a compiled model's CUDA-graph outputs are reused by its next run
        return model(tokens).clone()

    def padded(ids: Any) -> Any:
        return torch.cat([ids, ids[:1].expand(batch_size - ids.shape[0], -1)]) if pad and ids.shape[0] < batch_size else ids

    def score(ids: Any, reverse: Any = None) -> Any:
        rows = ids.shape[0]
        forward = run(padded(ids))
        if reverse is None:
            probs = activate(forward)[:rows]
            return torch.stack([probs, torch.ones_like(probs)]) if strands else probs
        backward = run(padded(reverse))
        if not strands:
            return activate((forward + backward) / 2)[:rows]
        plus, minus = activate(forward)[:rows], activate(backward)[:rows]
        strand = (plus > minus).to(torch.float64) - (plus < minus).to(torch.float64)
        return torch.stack([activate((forward + backward) / 2)[:rows], strand])

    return score


def default_batch_size(device: Any) -> int:
    """Windows per forward pass of a scan on ``device`` (a ``torch.device``): 4096 on a GPU, 512 on a CPU."""
    return 4096 if getattr(device, "type", str(device)) == "cuda" else 512


class _Writer(threading.Thread):
    """Turns scored batches into each target's output, in order; ``emit`` receives each finished target."""

    def __init__(self, kind: str, delimiter: str, threshold: float, class_name: str,
                 emit: Callable[[ScanTarget, TargetOutput], None], summary: ScanSummary) -> None:
        super().__init__(name="bioattn-scan-writer", daemon=True)
        self.kind, self.delimiter, self.threshold, self.class_name = kind, delimiter, threshold, class_name
        self.emit, self.summary = emit, summary
        self.queue: queue.Queue = queue.Queue(maxsize=16)
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            out: TargetOutput | None = None
            while (item := self.queue.get()) is not None:
                batch, scores = item
                if out is None:
                    out = TargetOutput(batch.target.chrom, self.kind, self.delimiter, self.threshold, self.class_name)
                if scores is not None:
                    windowed = self.kind in ("csv", "bed")
                    probs, strands = (scores[0], scores[1].astype(np.int8)) if scores.ndim == 2 else (scores, None)
                    out.add(batch.starts if windowed else batch.tile_starts, batch.ends if windowed else batch.tile_ends,
                            probs, strands)
                kept = 0 if scores is None else scores.shape[-1]
                self.summary.windows += kept
                self.summary.skipped_n_only += batch.windows - kept
                if batch.last:
                    out.finish()
                    self.summary.sequences += 1
                    self.summary.above_threshold += out.above
                    self.summary.regions += out.regions
                    self.emit(batch.target, out)
                    out = None
        except BaseException as exc:  # noqa: BLE001 - raised again in the calling thread
            self.error = exc
            while self.queue.get() is not None:  # let the scan finish putting, then stop
                pass

    def put(self, item: Any) -> None:
        while True:
            if self.error is not None:
                raise self.error
            try:
                self.queue.put(item, timeout=0.5)
                return
            except queue.Full:
                continue


def score_targets(model: Any, fasta: Any, path: Path, targets: Sequence[ScanTarget], *, window: int, stride: int,
                  batch_size: int, rc_average: bool, class_index: int, kind: str, delimiter: str,
                  emit: Callable[[ScanTarget, TargetOutput], None], summary: ScanSummary, compiled: bool) -> None:
    """Scan ``targets``; ``emit(target, output)`` gets each finished target's output, in order (writer thread)."""
    import torch
    device = next(model.parameters()).device

    def batches() -> Iterator[WindowBatch]:
        for target in targets:
            yield from target_batches(fasta, path, target, window, stride, batch_size, rc_average)

    score = make_scorer(model, class_index, batch_size, pad=compiled, strands=kind == "bed")
    writer = _Writer(kind, delimiter, model.threshold, model.class_names[class_index], emit, summary)
    writer.start()
    total = sum(len(WindowGrid(t.length, window, stride)) for t in targets)
    was_training = model.training
    model.eval()
    stream = feed(batches(), score, device, tokens=lambda b: (b.ids, b.reverse) if rc_average else b.ids,
                  chunks=lambda b: b.chunks)
    try:
        with progress_bar(total=total, desc="scan", unit="window", leave=False) as bar, torch.inference_mode():
            for batch, scores in stream:
                writer.put((batch, scores))
                bar.update(batch.windows)
        writer.put(None)
        writer.join()
        if writer.error is not None:
            raise writer.error
    finally:
        stream.close()
        if writer.is_alive():
            writer.queue.put(None)
            writer.join(timeout=5)
        model.train(was_training)
