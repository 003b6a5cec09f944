"""One-way reconciliation: move synthetic records' columns towards the DP 1-way counts.

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

BLOCK_ROWS = 65_536
"""Rows whose allowed values are computed at once (a rows x column-values boolean table)."""


def reconcile_one_way(
    table: PreparedTable,
    aggregates: AggregateSet,
    *,
    rng: np.random.Generator,
    in_place: bool = False,
) -> PreparedTable:
    """Re-draw surplus cells (empty or over-produced) with missing values (post-processing).

    Column by column (domain order): each reported value's target is its DP 1-count scaled to the
    table's record count (``n / max(protected count, Σ 1-counts of the column)``), the column's
    target of empty cells is the rest; a value's deficit is its target minus its count in the
    records, its surplus the opposite (both rounded, at least 0). Cells with a surplus — the
    empty cells first, then those of over-produced values, each in a seeded random order — get,
    one at a time, a value drawn in proportion to its remaining deficit among the values whose
    pairs with every other attribute of the record are reported, until the surpluses or the
    deficits are used up; a cell whose every value is excluded keeps its value. A new value never
    creates an unreported 1- or 2-combination; 3-combinations and longer are not checked (the
    records' own guarantee covers length <= R), so they may be fabricated.

    Args:
        table: synthetic records over ``aggregates.domain`` (codes, -1 = empty).
        aggregates: the (DP) aggregates the records were built from; read, never changed.
        rng: source of the fill order and the draws.
        in_place: change ``table``'s own codes (a table the caller made and gives up: no copy
            of the records); else a copy is changed and ``table`` is left as it was.

    Returns:
        A new PreparedTable (same domain, rows and multi-value columns).
    """
    dom = aggregates.domain
    codes = table.codes if in_place else table.codes.copy()
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
        empty_surplus = float((col < 0).sum()) - (n - float(target.sum()))
        surplus_of = np.maximum(np.rint(made - target), 0.0)  # over-produced values
        surplus_of = np.append(surplus_of, max(float(np.rint(empty_surplus)), 0.0))  # last: empty
        if surplus_of.sum() <= 0 or deficit.sum() <= 0:
            continue
        empty_rows = _narrow(np.flatnonzero(col < 0), n)
        over_rows = _narrow(np.flatnonzero((col >= 0) & (surplus_of[np.maximum(col, 0)] > 0)), n)
        # empty cells first, then cells of over-produced values, each set in a seeded order
        # (row numbers in the smallest integer; each set's permutation freed once applied)
        rows = np.concatenate([_in_order(empty_rows, rng), _in_order(over_rows, rng)])
        del empty_rows, over_rows
        uniforms = rng.random(rows.size)
        for start in range(0, rows.size, BLOCK_ROWS):  # bounded memory: rows x values per block
            block = rows[start : start + BLOCK_ROWS]
            allowed = _allowed_values(codes, block, c, lo, k, offsets, pairs, attr_col)
            allowed &= dp[None, :] > 0
            for i, row in enumerate(block.tolist()):
                u = int(codes[row, c])
                if surplus_of[u] <= 0:  # u = -1: the empty cells' surplus (last slot)
                    continue
                cum = np.cumsum(np.where(allowed[i], deficit, 0.0))
                if cum[-1] <= 0:
                    continue
                x = uniforms[start + i] * cum[-1]
                v = min(int(np.searchsorted(cum, x, side="right")), k - 1)
                codes[row, c] = v
                deficit[v] -= 1.0
                surplus_of[u] -= 1.0
            if deficit.sum() <= 0 or surplus_of.sum() <= 0:
                break
    return PreparedTable(dom, codes, table.multi_value_columns)


def _narrow(rows: NDArray[np.int64], n: int) -> NDArray[np.integer]:
    """Row numbers of a table of ``n`` rows as int32 when they fit (half the memory)."""
    return rows.astype(np.int32) if n <= np.iinfo(np.int32).max else rows


def _in_order(rows: NDArray[np.integer], rng: np.random.Generator) -> NDArray[np.integer]:
    """``rows[rng.permutation(rows.size)]``: the same draw, the permutation freed at once."""
    return rows[rng.permutation(rows.size)]


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
