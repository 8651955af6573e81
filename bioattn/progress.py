"""Progress on stderr: a tqdm bar on a terminal, one plain log line every few seconds otherwise.

A redrawn bar written to a log file or a pipe (batch jobs, ``nohup``, CI) becomes one carriage-return-separated
record per update; :func:`progress_bar` writes instead, when its stream is not a terminal, a line such as
``epoch 2/12: 410/1200 [00:40<01:17, 10.2step/s, loss=0.4113, lr=0.00291]`` every :data:`LOG_EVERY_S` seconds,
and the final state when it is new (nothing at all for a loop that stops before its first item, e.g. on bad input).
"""
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
    """A tqdm that prints its state as one full line every ``log_every_s`` seconds (the first after
    ``log_every_s``) and once more on close if it advanced since; it never redraws (no carriage returns)."""

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
        if msg == "" or self.n == self._last_line_n or too_soon:  # "" = clear; no progress: nothing new to say
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
        if self.n != self._last_line_n:  # the final state, unless already printed
            self._last_line_t = None
            self.display()
        self.disable = True
        self._decr_instances(self)


def progress_bar(iterable: Iterable | None = None, *, file: IO[str] | None = None,
                 log_every_s: float = LOG_EVERY_S, **kwargs: Any) -> tqdm:
    """``tqdm(iterable, **kwargs)`` on ``file`` (default stderr): a bar on a terminal or in Jupyter (a widget),
    else :class:`LogLines`. ``TQDM_DISABLE=1`` in the environment turns every bar off, even one a caller enabled."""
    stream = file or sys.stderr
    if os.environ.get("TQDM_DISABLE", "").lower() in ("1", "true", "yes"):
        kwargs["disable"] = True
    if stream.isatty() or "ipykernel" in sys.modules:
        return tqdm(iterable, file=stream, **kwargs)
    kwargs.pop("dynamic_ncols", None)
    return LogLines(iterable, file=stream, log_every_s=log_every_s, **kwargs)
