"""Errors the ``bioattn`` command reports in one line, without a traceback."""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Iterator, Sequence


class ReportedError(Exception):
    """Base of the errors printed as one ``error:`` line; ``exit_code`` is the command's exit status."""

    exit_code = 1


class UserInputError(ReportedError, ValueError):
    """An input problem the user can fix (bad file, bad record, bad option)."""

    exit_code = 2


class TrainingDivergedError(ReportedError, ArithmeticError):
    """Training stopped because the loss or gradient norm became NaN/inf (not an input problem)."""

    exit_code = 3


#: The signals :func:`interrupt_on_signals` turns into :class:`Terminated`.
TERMINATING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


class Terminated(KeyboardInterrupt):
    """Raised by the handler of :func:`interrupt_on_signals`: unwinds like Ctrl-C; ``exit_code`` is ``128 + signum``."""

    def __init__(self, signum: int) -> None:
        self.signum = int(signum)
        self.exit_code = 128 + self.signum
        super().__init__(f"terminated by {signal.Signals(self.signum).name}")


@contextlib.contextmanager
def interrupt_on_signals(signums: Sequence[int] = TERMINATING_SIGNALS) -> Iterator[None]:
    """Within the block, ``signums`` raise :class:`Terminated` in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise Terminated(signum)

    previous = {signum: signal.signal(signum, handler) for signum in signums}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
