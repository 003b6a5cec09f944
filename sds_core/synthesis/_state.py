"""The settings of a synthesis run and the mutable state of one batch, as the kernels take them.

:mod:`sds_core.synthesis.generator` builds one :class:`RunSettings` per run and one
:class:`WorkState` per batch next to the aggregates' :class:`~sds_core.synthesis.layout.Layout`;
the kernels read the settings and update the work state in place, so chunk calls chain.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

# slots of WorkState.counters (module-level ints: numba folds them into the kernels)
BUDGET_LEFT = 0
"""Attribute budget left in the current budget cycle (the sum of ``WorkState.avail``)."""
RECORDS_MADE = 1
"""Records written so far in this batch (over all chunk calls)."""
STATUS = 2
"""One of RUNNING, DONE, STALLED."""
N_COUNTERS = 3

# values of counters[STATUS]
RUNNING = 0
"""More records can be made."""
DONE = 1
"""Budgets used up and no reset allowed (no target): synthesis is complete."""
STALLED = 2
"""Budget left but no attribute has a positive weight: cannot progress (a bug)."""


class RunSettings(NamedTuple):
    """What a run does, fixed for all its batches and chunks (read-only in the kernels).

    Attributes:
        use_synthetic_counts: weight candidates by count minus synthetic count.
        percentile: weight selection percentile / 100 (the R-8 quantile beyond R).
        reset_budgets: a target is set: when the budgets run out, start a new budget cycle
            (budgets restored, synthetic counts zeroed) instead of stopping.
        sub_cap: most sub-combinations (length <= R) one candidate can hold.
        col_order: completion mode: columns best-ranked first.
        fill_rate: completion mode: share of records with a value in each column.
    """

    use_synthetic_counts: bool
    percentile: float
    reset_budgets: bool
    sub_cap: int
    col_order: NDArray[np.int64]
    fill_rate: NDArray[np.float64]


class WorkState(NamedTuple):
    """One batch's state, updated in place by the kernels and carried from chunk to chunk.

    Attributes:
        avail: budget left of each attribute.
        syn: synthetic count of every combination (the completion kernel keeps the triples'
            counts in ``triple_syn`` only, when the layout has triple lists).
        triple_syn: synthetic counts of the triples along the layout's CSR lists (one entry
            per position, like ``Layout.triples.count``).
        filled: records with a value in each column (completion fill rates).
        counters: int64 slots ``[BUDGET_LEFT]``, ``[RECORDS_MADE]``, ``[STATUS]``.
    """

    avail: NDArray[np.int64]
    syn: NDArray[np.int64]
    triple_syn: NDArray[np.int32] | NDArray[np.int64]
    filled: NDArray[np.int64]
    counters: NDArray[np.int64]


def new_work_state(
    budget: NDArray[np.int64], n_combinations: int, triple_count: NDArray[np.integer], n_cols: int
) -> WorkState:
    """Fresh state: full budgets, no synthetic counts, nothing filled, status RUNNING.

    Args:
        budget: each attribute's budget at the start of a cycle (``Layout.budget``).
        n_combinations: number of combinations (``Layout.counts.size``).
        triple_count: ``Layout.triples.count`` (its shape and dtype are the synthetic counts').
        n_cols: number of columns.
    """
    counters = np.zeros(N_COUNTERS, dtype=np.int64)
    counters[BUDGET_LEFT] = int(budget.sum())
    counters[STATUS] = RUNNING
    return WorkState(
        avail=budget.copy(),
        syn=np.zeros(n_combinations, dtype=np.int64),
        triple_syn=np.zeros_like(triple_count),
        filled=np.zeros(n_cols, dtype=np.int64),
        counters=counters,
    )
