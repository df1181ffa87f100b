"""Keep a long-running process's resident memory near what it uses: glibc's allocator raises
its mmap threshold each time a large block is freed, after which torch's activation buffers of
varying shapes come from the heap, fragment it and stay resident (`ragrig traces` grew from
~1.0 to ~1.8 GB over 100,000 lines this way, its live data flat). A fixed threshold sends every
block above it to its own mapping, returned on free; the price is a page-fault cost per large
allocation (docs/benchmarks.md §21 measures both)."""

from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3


def bound_heap(threshold: int = 1 << 20) -> bool:
    """Fix glibc's mmap and trim thresholds at `threshold` bytes; False where the C library is
    not glibc (nothing changed)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(M_MMAP_THRESHOLD, threshold)) and bool(mallopt(M_TRIM_THRESHOLD, threshold))
