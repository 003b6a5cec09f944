"""Helpers inlined into the completion kernel (:mod:`sds_core.synthesis._completion_kernel`).

The hash lookup of :mod:`sds_core.synthesis.layout` and the combination key of the reference kernel
recompiled for inlining, the candidates' sub-combination buffers (:class:`CandidateSubs`) and the
R-8 quantile of one candidate's weights (the weight beyond the reporting length, spec §2.1).
Inlined at numba-IR level, so the hot loops pay no call overhead.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from sds_core._jit import _inline
from sds_core.synthesis._reference_kernel import _combo_key
from sds_core.synthesis.layout import lookup

_lookup_i = _inline(getattr(lookup, "py_func", lookup))
_combo_key_i = _inline(getattr(_combo_key, "py_func", _combo_key))


class CandidateSubs(NamedTuple):
    """The sub-combinations of each candidate of the column being evaluated (row j = slot j).

    Attributes:
        subs: combination index of each sub-combination.
        wraw: its aggregate count (the raw weight).
        wadj: its count minus its synthetic count (the adjusted weight).
        nsub: number of sub-combinations per candidate.
        full: position in the row of the whole record plus the candidate (while <= R long).
    """

    subs: NDArray[np.int64]
    wraw: NDArray[np.int64]
    wadj: NDArray[np.int64]
    nsub: NDArray[np.int64]
    full: NDArray[np.int64]


@_inline
def quantile_r8(x: np.ndarray, r: int, n: int, p: float, tmp: np.ndarray) -> float:
    """R-8 quantile at p of the unsorted x[r, :n] (same value as sorting, then R-8).

    Only the two order statistics around ``h`` are needed, so it keeps the few largest (or
    smallest) values in ``tmp`` (insertion, O(n * kept)) instead of sorting the row.
    """
    h = (n + 1.0 / 3.0) * p + 1.0 / 3.0
    hf = int(np.floor(h))
    if hf <= 0 or p == 0.0:
        v = x[r, 0]
        for i in range(1, n):
            v = min(v, x[r, i])
        return float(v)
    if hf >= n or p == 1.0:
        v = x[r, 0]
        for i in range(1, n):
            v = max(v, x[r, i])
        return float(v)
    # ascending order statistics hf-1 (lo) and hf (hi), 0-based
    top = n - hf + 1  # elements at ascending positions hf-1 .. n-1
    if top <= hf + 1:
        m = 0  # tmp[:m] = largest values seen, descending
        for i in range(n):
            v = x[r, i]
            if m == top and v <= tmp[m - 1]:
                continue
            q = m if m < top else top - 1
            while q > 0 and tmp[q - 1] < v:
                tmp[q] = tmp[q - 1]
                q -= 1
            tmp[q] = v
            if m < top:
                m += 1
        lo_v, hi_v = tmp[top - 1], tmp[top - 2]
    else:
        keep = hf + 1  # ascending positions 0 .. hf
        m = 0  # tmp[:m] = smallest values seen, ascending
        for i in range(n):
            v = x[r, i]
            if m == keep and v >= tmp[m - 1]:
                continue
            q = m if m < keep else keep - 1
            while q > 0 and tmp[q - 1] > v:
                tmp[q] = tmp[q - 1]
                q -= 1
            tmp[q] = v
            if m < keep:
                m += 1
        lo_v, hi_v = tmp[hf - 1], tmp[hf]
    a = float(lo_v)
    return a + (h - hf) * (float(hi_v) - a)


@_inline
def push_sub(cs: CandidateSubs, j: int, idx: int, count: int, used: int, is_full: bool) -> None:
    """Append sub-combination ``idx`` to candidate ``j``'s weights.

    ``count`` is its (scaled) aggregate count, ``used`` its synthetic count (0 when synthetic
    counts are off); ``is_full`` marks the combination of the whole record plus the candidate,
    whose count is the weight while the record is shorter than the reporting length.
    """
    ns = cs.nsub[j]
    cs.subs[j, ns] = idx
    cs.wraw[j, ns] = count
    cs.wadj[j, ns] = count - used
    cs.nsub[j] = ns + 1
    if is_full:
        cs.full[j] = ns
