"""One step of building a record, shared by both synthesis kernels (inlined into them).

The integer-weighted choice, the lexicographic k-subset walk, inserting a picked attribute into the
sorted record, writing a finished record and starting a new budget cycle (spec §2.1): compiled with
``inline="always"`` (the budget cycle, once per cycle, as a plain call), so the kernels in
:mod:`sds_core.synthesis._reference_kernel` and :mod:`sds_core.synthesis._completion_kernel` pay no
call overhead in their hot loops.
"""

from __future__ import annotations

import numpy as np

from sds_core._jit import _inline, _jit
from sds_core.synthesis._state import BUDGET_LEFT, DONE, STATUS, WorkState

__all__ = [
    "insert_attribute",
    "new_budget_cycle",
    "next_subset",
    "weighted_index",
    "write_record",
]


@_inline
def next_subset(sidx: np.ndarray, k: int, s: int) -> bool:
    """Advance sidx[:k] to the next k-subset of 0..s-1 (lexicographic); False after the last."""
    t = k - 1
    while t >= 0 and sidx[t] == s - k + t:
        t -= 1
    if t < 0:
        return False
    sidx[t] += 1
    for t2 in range(t + 1, k):
        sidx[t2] = sidx[t2 - 1] + 1
    return True


@_inline
def insert_attribute(rec: np.ndarray, s: int, x: int) -> None:
    """Insert attribute x into the ascending record rec[:s] (one slot free at s)."""
    p = s
    while p > 0 and rec[p - 1] > x:
        rec[p] = rec[p - 1]
        p -= 1
    rec[p] = x


@_inline
def write_record(out: np.ndarray, row: int, attr_col: np.ndarray, rec: np.ndarray, s: int) -> None:
    """out[row] = the record's attribute ids in their columns, -1 (empty) elsewhere."""
    out[row, :] = -1
    for t in range(s):
        out[row, attr_col[rec[t]]] = rec[t]


@_inline
def weighted_index(wts: np.ndarray, n: int, total: np.int64, uniform: float) -> int:
    """Integer-weighted choice among wts[:n] (sum ``total`` > 0), as the reference draws it.

    ``u = floor(uniform * total) + 1`` (at most ``total``), then the first t whose cumulative
    weight reaches u.
    """
    u = np.int64(np.floor(uniform * total)) + 1
    if u > total:
        u = total
    acc = np.int64(0)
    for t in range(n):
        acc += wts[t]
        if acc >= u:
            return t
    return n - 1


@_jit
def new_budget_cycle(work: WorkState, budget: np.ndarray, reset_budgets: bool) -> bool:
    """Budgets used up: with a target, restore them and zero the synthetic counts (spec §2.1).

    Returns False (and sets the status to DONE) when there is no target (``reset_budgets``
    False) or no budget at all. Called once per budget cycle, so its call overhead does not
    matter.
    """
    if not reset_budgets:
        work.counters[STATUS] = DONE
        return False
    work.avail[:] = budget
    work.syn[:] = 0
    work.triple_syn[:] = 0
    work.counters[BUDGET_LEFT] = budget.sum()
    if work.counters[BUDGET_LEFT] <= 0:
        work.counters[STATUS] = DONE
        return False
    return True
