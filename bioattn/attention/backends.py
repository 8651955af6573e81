"""One process-wide switch for the kernel behind every attention block of :mod:`bioattn.attention`: ``auto``
(default, torch picks), ``math``, ``flash``, ``efficient``, ``cudnn`` (that ``SDPBackend`` of torch; one that cannot
run the inputs raises a ``RuntimeError``) or ``explicit`` (bioattn's own softmax, the ``need_weights=True`` path)::

    import bioattn.attention as A
    A.set_backend("math")            # for the whole process
    with A.use_backend("explicit"):  # for a block of code, restored on exit
        out, _ = model(x)
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Literal

from torch.nn.attention import SDPBackend

__all__ = ["BACKENDS", "Backend", "set_backend", "get_backend", "use_backend", "torch_backend"]

Backend = Literal["auto", "math", "flash", "efficient", "cudnn", "explicit"]
BACKENDS: tuple[str, ...] = ("auto", "math", "flash", "efficient", "cudnn", "explicit")

_TORCH_BACKENDS = {"math": SDPBackend.MATH, "flash": SDPBackend.FLASH_ATTENTION,
                   "efficient": SDPBackend.EFFICIENT_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
_current: str = "auto"


def set_backend(name: Backend) -> None:
    """Choose the attention kernel for every bioattn block from now on; ``name``: one of :data:`BACKENDS`."""
    global _current
    if name not in BACKENDS:
        raise ValueError(f"attention backend must be one of {', '.join(BACKENDS)}; got {name!r}")
    _current = name


def get_backend() -> str:
    """The attention kernel in use: ``"auto"`` unless :func:`set_backend` / :func:`use_backend` chose another."""
    return _current


@contextmanager
def use_backend(name: Backend) -> Iterator[None]:
    """Context manager: run the block with attention backend ``name``, then restore the previous choice."""
    previous = get_backend()
    set_backend(name)
    try:
        yield
    finally:
        set_backend(previous)


def torch_backend(name: str) -> SDPBackend | None:
    """The :class:`torch.nn.attention.SDPBackend` behind ``name``; None for ``"auto"`` and ``"explicit"``."""
    return _TORCH_BACKENDS.get(name)
