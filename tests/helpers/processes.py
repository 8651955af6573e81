"""Signal tests: interrupt a child process once it says it is ready."""
from __future__ import annotations

import subprocess
from typing import Callable


def interrupt_when_ready(proc: subprocess.Popen, signum: int, while_ready: Callable[[], None] | None = None) -> str:
    """Wait for ``proc`` to print ``ready``, call ``while_ready()`` (checks on its work in progress), send it
    ``signum`` and wait for it to exit (killed if it has not after 60 s); its standard error."""
    try:
        assert proc.stdout.readline().strip() == "ready"
        if while_ready is not None:
            while_ready()
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return stderr
