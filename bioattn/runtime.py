"""Process-wide settings of the ``bioattn`` command (not applied by importing the library)."""
from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["keep_freed_memory"]

# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: blocks below this come from the heap and are reused after being freed
MMAP_THRESHOLD = 1 << 30
#: the heap is never shrunk below its peak
TRIM_THRESHOLD = (1 << 31) - 1
_ALLOCATOR_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_ARENA_MAX")


def keep_freed_memory() -> bool:
    """Tell glibc's allocator to keep freed memory for reuse; whether it did."""
    if not sys.platform.startswith("linux") or any(name in os.environ for name in _ALLOCATOR_VARIABLES):
        return False
    if any(name in os.environ.get("LD_PRELOAD", "") for name in ("jemalloc", "tcmalloc", "mimalloc")):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    # some glibc builds refuse an mmap threshold above 32 MiB: take the largest they accept
    mapped = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) or mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    return bool(mapped) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
