"""The project's one way to compile a kernel with numba (optional: plain Python without it).

Every compiled module (DP counting, noise, normalisation, evaluation, synthesis) decorates its
loops with :func:`_jit` (cached on disk, GIL released) or, for small helpers called from hot
loops, :func:`_inline` (inlined at numba-IR level, so no call or reference-count overhead).
Without numba both return the function unchanged: same results, slower.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

try:  # numba is an optional accelerator: identical results, ~10-100x faster
    from numba import njit as _njit

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised only where numba is absent
    HAVE_NUMBA = False

__all__ = ["HAVE_NUMBA", "_inline", "_jit", "load_compiler"]


def load_compiler() -> None:
    """Initialise numba's CPU target now rather than inside the first kernel call.

    numba does it lazily on the first call of any compiled function in a process, even one
    loaded from the disk cache: it imports its typing and lowering registries (``numba.np.*``,
    which import ``scipy.linalg`` for BLAS) and sets up LLVM, 0.2-0.6 s on 2 cores. Idempotent,
    starts no thread; without numba it does nothing.
    """
    if HAVE_NUMBA:
        from numba.core.registry import cpu_target

        cpu_target.target_context.refresh()


def _jit(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Compile ``fn`` (cache=True, nogil=True) when numba is installed."""
    return _njit(cache=True, nogil=True)(fn) if HAVE_NUMBA else fn


def _inline(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Compile ``fn`` to be inlined at numba-IR level into its callers.

    A non-inlined call increments and decrements the reference count of every array argument
    (atomic instructions); in the per-candidate loops that cost more than the work itself.
    """
    return _njit(cache=True, nogil=True, inline="always")(fn) if HAVE_NUMBA else fn
