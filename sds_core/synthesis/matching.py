"""Record matching: move synthetic records towards their own DP aggregates, within the guarantee.

The last step of aggregate-seeded synthesis (:mod:`sds_core.synthesis.generator`,
``SynthesisParams.match_aggregates``). A local search over the records' cells lowers the squared
gap between the records' combination counts and the DP counts (1-, 2- and 3-way, weighted by
length) and never creates a combination the aggregates do not report, so records that hold no
unreported combination of length <= R keep holding none. It reads only the records and the (DP)
aggregates: post-processing, no privacy budget. docs/synthesis.md measures it.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from sds_core.data.table import PreparedTable
from sds_core.errors import require
from sds_core.marginals.aggregates import AggregateSet
from sds_core.synthesis._matching_kernel import MatchState, count_synthetic, match_pass, subsets
from sds_core.synthesis.layout import Layout, build_layout

__all__ = ["MAX_DROPS", "MAX_PASSES", "WEIGHT_BY_LEN", "match_aggregates"]

WEIGHT_BY_LEN = (1.0, 1.0, 0.1)
"""Objective weight of a combination of length 1, 2, 3 (longer ones: the last value)."""
MAX_DROPS = 2
"""Cells a value below its DP 1-count may empty to enter a record (its conflicts)."""
MAX_PASSES = 6
"""Passes over all records at most."""
STOP_SHARE = 0.002
"""A pass that moves fewer cells than this share of the records ends the search."""


def match_aggregates(
    table: PreparedTable,
    aggregates: AggregateSet,
    *,
    rng: np.random.Generator,
    layout: Layout | None = None,
    passes: int = MAX_PASSES,
) -> PreparedTable:
    """The records, moved cell by cell towards the DP counts without unreported combinations.

    Each pass visits the records in a seeded random order and each of their cells; a cell takes
    the value (or "empty") that lowers ``sum_k w_k * sum_c (synthetic_c - DP_c) ** 2`` the most
    (c over the reported combinations of length k, ``w`` = :data:`WEIGHT_BY_LEN`, plus the
    columns' empty cells against ``records - sum of the column's DP 1-counts`` at weight w_1),
    among the values whose every combination with <= R - 1 of the record's other attributes is
    reported. A value below its DP 1-count may also empty up to :data:`MAX_DROPS` cells that
    block it. Passes stop when one moves fewer than :data:`STOP_SHARE` of the records, or after
    ``passes``.

    Args:
        table: synthetic records over ``aggregates.domain`` (codes, -1 = empty).
        aggregates: the (DP) aggregates the records were built from; read, never changed.
        rng: source of the visiting orders.
        layout: ``build_layout(aggregates, None)`` when the caller has it (else built here).
        passes: most passes over the records (>= 0; 0 returns the table unchanged).

    Returns:
        A new PreparedTable (same domain, record count and multi-value columns).
    """
    require(passes >= 0, f"passes must be >= 0, got {passes}")
    require(
        table.domain == aggregates.domain,
        "the records must use the aggregates' domain (same columns and values)",
    )
    n = table.n_records
    if n == 0 or passes == 0 or len(aggregates.counts_of(1)) == 0:
        return table
    lay = layout if layout is not None else build_layout(aggregates, None)
    dom = aggregates.domain
    offsets = np.asarray(dom.offsets[:-1], dtype=np.int64)
    ids = np.where(table.codes >= 0, table.codes.astype(np.int64) + offsets[None, :], -1)
    st = MatchState(
        syn=np.zeros(lay.counts.size, dtype=np.int64),
        weight_by_len=weight_by_len(aggregates.reporting_length),
        empty_count=(ids < 0).sum(axis=0).astype(np.int64),
        empty_target=_empty_target(aggregates, n),
    )
    sets = subsets(dom.n_columns - 1, aggregates.reporting_length)
    count_synthetic(ids, lay, st.syn, sets)
    for _ in range(passes):
        moves = match_pass(ids, rng.permutation(n).astype(np.int64), lay, st, sets, MAX_DROPS)
        if moves < STOP_SHARE * n:
            break
    codes = np.where(ids >= 0, ids - offsets[None, :], -1).astype(np.int32)
    return PreparedTable(dom, codes, table.multi_value_columns)


def weight_by_len(reporting_length: int) -> NDArray[np.float64]:
    """:data:`WEIGHT_BY_LEN` as the kernel reads it: index k = length (0 unused).

    >>> weight_by_len(4).tolist()
    [0.0, 1.0, 1.0, 0.1, 0.1]
    """
    w = np.zeros(reporting_length + 1, dtype=np.float64)
    for k in range(1, reporting_length + 1):
        w[k] = WEIGHT_BY_LEN[min(k, len(WEIGHT_BY_LEN)) - 1]
    return w


def _empty_target(aggregates: AggregateSet, n: int) -> NDArray[np.float64]:
    """Empty cells per column that the DP 1-counts imply for n records (at least 0)."""
    dom = aggregates.domain
    c1 = aggregates.counts_of(1)
    cols = dom.attribute_columns()[c1.attrs[:, 0]]
    filled = np.bincount(cols, weights=c1.counts.astype(np.float64), minlength=dom.n_columns)
    target: NDArray[np.float64] = np.maximum(float(n) - filled, 0.0)
    return target
