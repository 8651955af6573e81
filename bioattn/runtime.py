"""Process-wide settings of the ``bioattn`` command (not applied by importing the library).

:func:`keep_freed_memory`: on Linux with glibc, the C allocator hands every block above a threshold (at most
32 MiB by default) straight back to the operating system when it is freed, so a CPU model whose activations are
tens of MiB (a genome scan's batch of 512 windows: a 37 MiB feed-forward layer) gets fresh pages from the kernel,
and page-faults on every one of them, at every batch. Keeping freed memory in the process instead makes CPU
inference faster (measured with ``bench/scan.py``, see docs/experiments.md). It is the setting that jemalloc or
tcmalloc preloading gives, without a new dependency.
"""
from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["keep_freed_memory"]

# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: blocks below this come from the heap and are reused after being freed (glibc's default: 128 KiB, rising to 32 MiB)
MMAP_THRESHOLD = 1 << 30
#: the heap is never shrunk below its peak (glibc's default: 128 KiB above it)
TRIM_THRESHOLD = (1 << 31) - 1
_ALLOCATOR_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_ARENA_MAX")


def keep_freed_memory() -> bool:
    """Tell glibc's allocator to keep freed memory for reuse (see the module docstring); returns whether it did.

    Nothing is changed (``False``) off Linux, without glibc, or when the user chose the allocator's behaviour
    already: a ``MALLOC_*`` tuning variable is set, or ``LD_PRELOAD`` names another allocator. The cost: the
    process keeps its peak memory until it exits instead of returning it between batches.
    """
    if not sys.platform.startswith("linux") or any(name in os.environ for name in _ALLOCATOR_VARIABLES):
        return False
    if any(name in os.environ.get("LD_PRELOAD", "") for name in ("jemalloc", "tcmalloc", "mimalloc")):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the interpreter runs on
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    # some glibc builds refuse an mmap threshold above 32 MiB: take the largest they accept
    mapped = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) or mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    return bool(mapped) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
