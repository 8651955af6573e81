"""Progress on stderr: a tqdm bar on a terminal, one plain log line every :data:`LOG_EVERY_S` seconds otherwise."""
from __future__ import annotations

import os
import sys
import time
from typing import IO, Any, Iterable

from tqdm import std
from tqdm.auto import tqdm

LOG_EVERY_S = 10.0
LOG_FORMAT = "{desc}: {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]"


class LogLines(std.tqdm):
    """A tqdm that prints its state as one line every ``log_every_s`` seconds and on close; it never redraws."""

    def __init__(self, *args: Any, log_every_s: float = LOG_EVERY_S, **kwargs: Any) -> None:
        self._log_every_s = log_every_s
        self._last_line_t: float | None = time.monotonic()
        self._last_line_n = 0
        kwargs.setdefault("bar_format", LOG_FORMAT)
        super().__init__(*args, mininterval=log_every_s, miniters=1, **kwargs)

    def clear(self, nolock: bool = False) -> None:
        """Nothing to erase: lines are never redrawn."""

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        now = time.monotonic()
        too_soon = self._last_line_t is not None and now - self._last_line_t < self._log_every_s
        if msg == "" or self.n == self._last_line_n or too_soon:
            return True
        self._last_line_t, self._last_line_n = now, self.n
        if msg is None:
            state = self.format_dict
            state["prefix"] = (state.get("prefix") or "").removesuffix(": ")  # set_description appends ": "
            msg = self.format_meter(**state)
        self.fp.write(msg.strip() + "\n")
        self.fp.flush()
        return True

    def close(self) -> None:
        if self.disable:
            return
        if self.n != self._last_line_n:
            self._last_line_t = None
            self.display()
        self.disable = True
        self._decr_instances(self)


def progress_bar(iterable: Iterable | None = None, *, file: IO[str] | None = None,
                 log_every_s: float = LOG_EVERY_S, **kwargs: Any) -> tqdm:
    """``tqdm(iterable, **kwargs)`` on a terminal or in Jupyter, else :class:`LogLines`."""
    stream = file or sys.stderr
    if os.environ.get("TQDM_DISABLE", "").lower() in ("1", "true", "yes"):
        kwargs["disable"] = True
    if stream.isatty() or "ipykernel" in sys.modules:
        return tqdm(iterable, file=stream, **kwargs)
    kwargs.pop("dynamic_ncols", None)
    return LogLines(iterable, file=stream, log_every_s=log_every_s, **kwargs)
