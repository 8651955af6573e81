"""Keep a model fed: batches of token ids prepared in a background thread, copied to the device without blocking,
scored in the calling thread, results copied back while the device computes the next batch.

:func:`feed` is the one entry: give it an iterable of batches (anything; ``tokens`` picks out the batch's
``(N, L)`` uint8 token arrays, e.g. a window's forward strand and its reverse complement) and a scoring callable
that takes the same number of ``(N, L)`` long tensors on ``device`` and returns a tensor (or a tuple of tensors)
whose first dimension or last dimension is anything you like; it yields ``(batch, outputs)`` in the order of the
batches, ``outputs`` as numpy arrays on the host (a tuple when ``score`` returns one). Batches with ``N == 0`` are
not scored (``outputs`` is None).

On a CUDA device each batch's tokens are staged in page-locked (pinned) memory by the background thread, copied
with ``non_blocking=True`` and widened to long on the device; outputs are copied into pinned host memory without
blocking, and batch *k*'s outputs are only read (its copy event waited on) after batch *k + 1* has been queued,
so the device never waits for the host between two batches. Pinned buffers come from PyTorch's caching host
allocator, which reuses a buffer only once the copies that used it are done. On a CPU the same code runs without
pinned memory or events: the background thread widens the tokens to int64 (in one pass from any strides, so
strided views of a longer array cost one copy).

Thread-local settings of the calling thread (``torch.inference_mode``, autocast) apply to ``score``: it runs in
the calling thread. The background thread ends when the iterable is exhausted, when ``feed``'s generator is
closed, or on an error, which is raised again in the calling thread.

Example (variant scoring)::

    from bioattn.tasks.device_feed import feed

    batches = ((ref, alt) for ref, alt in pairs)             # (N, L) uint8 arrays
    for (ref, alt), (p_ref, p_alt) in feed(batches, lambda r, a: (model.proba_from_ids(r), model.proba_from_ids(a)),
                                           device, tokens=lambda pair: pair):
        ...
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Iterable, Iterator, TypeVar

import numpy as np

B = TypeVar("B")
_DONE = object()


def _as_tuple(value: Any) -> tuple:
    return value if isinstance(value, tuple) else (value,)


class _Producer(threading.Thread):
    """Iterates the batches and stages their tokens (pinned on CUDA) into a bounded queue."""

    def __init__(self, batches: Iterable[Any], tokens: Callable[[Any], Any], pin: bool, depth: int) -> None:
        super().__init__(name="bioattn-feed", daemon=True)
        self.batches, self.tokens, self.pin = batches, tokens, pin
        self.queue: queue.Queue = queue.Queue(maxsize=depth)
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def _stage(self, array: np.ndarray) -> Any:
        import torch

        array = np.asarray(array)
        if not self.pin:  # widened here, beside the model's thread, in one pass from any strides
            return torch.from_numpy(array.astype(np.int64, order="C"))
        staged = torch.empty(array.shape, dtype=torch.uint8, pin_memory=True)
        staged.numpy()[...] = array
        return staged

    def _put(self, item: Any) -> bool:
        while not self.stop.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run(self) -> None:
        try:
            for batch in self.batches:
                arrays = _as_tuple(self.tokens(batch))
                staged = tuple(self._stage(a) for a in arrays) if len(arrays[0]) else None
                if not self._put((batch, staged)):
                    return
        except BaseException as exc:  # noqa: BLE001 - raised again in the calling thread
            self.error = exc
        self._put(_DONE)


def _score_in_chunks(score: Callable[..., Any], ids: tuple, sizes: Any) -> tuple:
    """``score`` on consecutive row chunks of ``sizes`` rows of ``ids`` (empty chunks skipped), outputs joined
    along their last dimension."""
    import torch

    parts, at = [], 0
    for size in sizes:
        if size:
            parts.append(_as_tuple(score(*(i[at : at + size] for i in ids))))
            at += size
    return tuple(torch.cat(column, dim=-1) for column in zip(*parts))


def feed(batches: Iterable[B], score: Callable[..., Any], device: Any, *,
         tokens: Callable[[B], Any] = lambda batch: batch, prefetch: int = 4,
         chunks: Callable[[B], Any] | None = None) -> Iterator[tuple[B, Any]]:
    """Yield ``(batch, outputs)`` for each of ``batches``, in order: ``score(*ids)`` on the ``(N, L)`` uint8 token
    arrays ``tokens(batch)`` (one array or a tuple) moved to ``device`` (a ``torch.device``) as long tensors,
    ``outputs`` its result as numpy arrays (a tuple when ``score`` returns a tuple; None when ``N == 0``).
    ``prefetch``: batches prepared ahead by the background thread. ``chunks``: for a host batch larger than the
    model's, ``chunks(batch)`` gives the rows of each model call (summing to ``N``); ``score`` then runs once per
    chunk and its outputs are joined along their last dimension (so the model sees the same calls as with one
    batch per chunk, while the host handles one batch). See the module's text for what overlaps."""
    import torch

    cuda = getattr(device, "type", str(device)) == "cuda"
    producer = _Producer(batches, tokens, pin=cuda, depth=max(1, prefetch))
    producer.start()
    in_flight: list[tuple[Any, Any, Any]] = []  # (batch, host outputs, copy event)

    def finished(entry: tuple[Any, Any, Any]) -> tuple[Any, Any]:
        batch, host, event = entry
        if host is None:
            return batch, None
        if event is not None:
            event.synchronize()
        arrays = tuple(h.numpy() for h in host)
        return batch, arrays if len(arrays) > 1 else arrays[0]

    try:
        while True:
            try:
                item = producer.queue.get(timeout=0.5)
            except queue.Empty:
                if producer.error is not None:
                    raise producer.error
                continue
            if item is _DONE:
                break
            batch, staged = item
            if staged is None:
                in_flight.append((batch, None, None))
            else:
                ids = tuple(s.to(device, non_blocking=True).long() if cuda else s.to(device) for s in staged)
                result = _as_tuple(score(*ids)) if chunks is None else _score_in_chunks(score, ids, chunks(batch))
                if cuda:
                    host = tuple(torch.empty(r.shape, dtype=r.dtype, pin_memory=True) for r in result)
                    for h, r in zip(host, result):
                        h.copy_(r, non_blocking=True)
                    event = torch.cuda.Event()
                    event.record()
                    in_flight.append((batch, host, event))
                else:
                    in_flight.append((batch, tuple(r.detach().cpu() for r in result), None))
            while len(in_flight) > (1 if cuda else 0):  # on CUDA: read batch k once batch k + 1 is queued
                yield finished(in_flight.pop(0))
        while in_flight:
            yield finished(in_flight.pop(0))
        if producer.error is not None:
            raise producer.error
    finally:
        producer.stop.set()
        producer.join(timeout=5)
