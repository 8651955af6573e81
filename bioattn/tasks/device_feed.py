"""Keep a model fed: token batches staged in a background thread, scored in the calling thread."""
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
    """Stages each batch's tokens (pinned on CUDA) into a bounded queue."""

    def __init__(self, batches: Iterable[Any], tokens: Callable[[Any], Any], pin: bool, depth: int) -> None:
        super().__init__(name="bioattn-feed", daemon=True)
        self.batches, self.tokens, self.pin = batches, tokens, pin
        self.queue: queue.Queue = queue.Queue(maxsize=depth)
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def _stage(self, array: np.ndarray) -> Any:
        import torch
        array = np.asarray(array)
        if not self.pin:
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
    """``score`` on consecutive row chunks of ``ids``, outputs joined along their last dimension."""
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
    """Yield ``(batch, outputs)`` in order: ``score(*ids)`` on ``tokens(batch)`` ``(N, L)`` on ``device``."""
    import torch
    cuda = getattr(device, "type", str(device)) == "cuda"
    producer = _Producer(batches, tokens, pin=cuda, depth=max(1, prefetch))
    producer.start()
    in_flight: list[tuple[Any, Any, Any]] = []

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
            while len(in_flight) > (1 if cuda else 0):
                yield finished(in_flight.pop(0))
        while in_flight:
            yield finished(in_flight.pop(0))
        if producer.error is not None:
            raise producer.error
    finally:
        producer.stop.set()
        producer.join(timeout=5)
