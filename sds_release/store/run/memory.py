"""Giving the allocators' free memory back to the operating system between stages.

A stage's temporaries are freed when it returns, but the allocators keep the pages: Arrow's
memory pool (mimalloc or jemalloc) holds its freed blocks for reuse, and glibc keeps freed heap
and arena pages mapped. The next stage allocates mostly through the *other* allocator (numpy
through glibc, Arrow kernels through its pool), so the pages one kept add to the next one's
peak: the process's resident set is then the sum of both allocators' high-water marks, not of
what is alive. Called at the end of every stage (:class:`~sds_release.store.run.stages.Timeline`);
it frees nothing that is alive and changes no result.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from typing import Any

__all__ = ["return_free_memory"]


@functools.cache
def _malloc_trim() -> Any:
    """glibc's ``malloc_trim``, or None (another C library, or not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    name = "libc.so.6"  # glibc; another C library has no malloc_trim
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    trim = getattr(libc, "malloc_trim", None)
    if trim is not None:
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def return_free_memory() -> None:
    """Release the Arrow pool's unused memory and trim glibc's heap (a few milliseconds)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
