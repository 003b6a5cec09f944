"""One-way reconciliation: fill empty cells of synthetic records towards the DP 1-way counts.

An optional last step of aggregate-seeded synthesis (:mod:`sds_core.synthesis.generator`,
``SynthesisParams.reconcile_one_way``). It reads only the synthetic records and the (DP)
aggregates, so it is post-processing. It relaxes the records' guarantee from "no unreported
combination of length <= R" to "no unreported combination of length <= 2" (docs/synthesis.md).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from sds_core.data.table import PreparedTable
from sds_core.marginals.aggregates import AggregateSet

__all__ = ["reconcile_one_way"]


def reconcile_one_way(
    table: PreparedTable, aggregates: AggregateSet, *, rng: np.random.Generator
) -> PreparedTable:
    """Fill empty cells of under-filled columns with values the records lack (post-processing).

    Column by column (domain order): each reported value's target is its DP 1-count scaled to the
    table's record count (``n / max(protected count, Σ 1-counts of the column)``), the column's
    target of empty cells is the rest. When the records leave more cells empty than that, the
    empty cells of records in a seeded random order are filled, one at a time, with a value drawn
    in proportion to its remaining deficit (target − count in the records, rounded) among the
    values whose pairs with every other attribute of the record are reported, until the surplus
    of empty cells or the deficits are used up. Records whose every value is excluded stay empty.
    Filled values never create an unreported 1- or 2-combination; 3-combinations and longer are
    not checked (the records' own guarantee covers length <= R).

    Args:
        table: synthetic records over ``aggregates.domain`` (codes, -1 = empty).
        aggregates: the (DP) aggregates the records were built from; read, never changed.
        rng: source of the fill order and the draws.

    Returns:
        A new PreparedTable (same domain, rows and multi-value columns).
    """
    dom = aggregates.domain
    codes = table.codes.copy()
    n = codes.shape[0]
    if n == 0:
        return table
    offsets = np.asarray(dom.offsets, dtype=np.int64)
    one = np.zeros(dom.n_attributes, dtype=np.float64)
    c1 = aggregates.counts_of(1)
    one[c1.attrs[:, 0]] = c1.counts
    pairs = _pair_attrs(aggregates)
    attr_col = np.asarray(dom.attribute_columns(), dtype=np.int64)
    protected = aggregates.protected_number_of_records or n
    for c in range(dom.n_columns):
        lo, k = int(offsets[c]), dom.cardinalities[c]
        dp = one[lo : lo + k]
        col = codes[:, c]
        target = dp * (n / max(float(protected), float(dp.sum()), 1.0))
        made = np.bincount(col[col >= 0], minlength=k).astype(np.float64)
        deficit = np.maximum(np.rint(target - made), 0.0)
        surplus = int(round(float((col < 0).sum()) - (n - float(target.sum()))))
        if surplus <= 0 or deficit.sum() <= 0:
            continue
        empty = np.flatnonzero(col < 0)
        empty = empty[rng.permutation(empty.size)]
        allowed = _allowed_values(codes, empty, c, lo, k, offsets, pairs, attr_col)
        allowed &= dp[None, :] > 0
        uniforms = rng.random(empty.size)
        filled = 0
        for i, row in enumerate(empty.tolist()):
            if filled >= surplus or deficit.sum() <= 0:
                break
            w = np.where(allowed[i], deficit, 0.0)
            cum = np.cumsum(w)
            if cum[-1] <= 0:
                continue
            v = min(int(np.searchsorted(cum, uniforms[i] * cum[-1], side="right")), k - 1)
            codes[row, c] = v
            deficit[v] -= 1.0
            filled += 1
    return PreparedTable(dom, codes, table.multi_value_columns)


def _pair_attrs(aggregates: AggregateSet) -> NDArray[np.int64] | None:
    """The reported 2-combinations as (a, b) rows, both orders (None: R = 1, nothing to check)."""
    if aggregates.reporting_length < 2:
        return None
    a = aggregates.counts_of(2).attrs.astype(np.int64)
    return np.concatenate([a, a[:, ::-1]])


def _allowed_values(
    codes: NDArray[np.int32],
    rows: NDArray[np.int64],
    c: int,
    lo: int,
    k: int,
    offsets: NDArray[np.int64],
    pairs: NDArray[np.int64] | None,
    attr_col: NDArray[np.int64],
) -> NDArray[np.bool_]:
    """allowed[i, v]: value v of column c forms a reported pair with every attribute of rows[i].

    ``pairs`` None (R = 1): every value is allowed.
    """
    allowed = np.ones((rows.size, k), dtype=np.bool_)
    if pairs is None:
        return allowed
    # partner[x, v]: attribute x (any column) is reported with value v of column c
    into_c = pairs[attr_col[pairs[:, 1]] == c]
    partner = np.zeros((int(offsets[-1]), k), dtype=np.bool_)
    partner[into_c[:, 0], into_c[:, 1] - lo] = True
    for other in range(len(offsets) - 1):
        if other == c:
            continue
        x = codes[rows, other].astype(np.int64)
        has = x >= 0
        allowed[has] &= partner[x[has] + offsets[other]]
    return allowed
