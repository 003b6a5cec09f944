"""Records drawn from a fitted model, one column at a time, with balanced controlled rounding.

Columns are placed in the junction tree's order: the root clique's columns one after another,
then each later clique's new columns. A column is placed by splitting every group of records
that share the values already placed in its clique (the separator and the clique's earlier new
columns) by the model's conditional distribution. Each group's expected counts are rounded to
the floor or the ceiling (the group keeps its size), and across groups the roundings are
*balanced* (:func:`round_balanced`): a value already rounded up in earlier groups is rounded down
next, so every column's 1-way count stays within about one record of the model's marginal
instead of drifting by the square root of the number of groups. The synthetic records'
marginals therefore match the model's closely instead of carrying sampling noise: a model fitted
to DP counts yields records inside the published noise of those counts (issue 22).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from sds_core._jit import _jit
from sds_core.errors import invariant
from sds_core.model.estimation import FittedModel
from sds_core.model.inference import Table

_POSITIVE = 1e-12
"""A fractional part above this may be rounded up (below it the cell's expectation is whole)."""


@_jit
def _balanced_kernel(
    cond: NDArray[np.float64],
    sizes: NDArray[np.int64],
    order: NDArray[np.int64],
    tiebreak: NDArray[np.float64],
) -> NDArray[np.int64]:
    """Rows of ``cond`` times ``sizes`` rounded (rows in ``order``), balancing column drift."""
    n_groups, n_values = cond.shape
    out = np.zeros((n_groups, n_values), dtype=np.int64)
    drift = np.zeros(n_values)  # per value: records given so far minus records expected
    frac = np.empty(n_values)
    key = np.empty(n_values)
    for i in range(n_groups):
        g = order[i]
        size = sizes[g]
        if size == 0:
            continue
        rest = size
        for v in range(n_values):
            expected = cond[g, v] * size
            base = np.floor(expected)
            out[g, v] = np.int64(base)
            rest -= np.int64(base)
            frac[v] = expected - base
            drift[v] += base - expected
        if rest <= 0:
            continue
        for v in range(n_values):  # the most under-given values first; whole cells last
            key[v] = drift[v] + tiebreak[v] if frac[v] > _POSITIVE else np.inf
        picks = np.argsort(key)
        for r in range(min(rest, n_values)):
            v = picks[r]
            out[g, v] += 1
            drift[v] += 1.0
    return out


def round_balanced(
    cond: NDArray[np.float64], sizes: NDArray[np.int64], rng: np.random.Generator
) -> NDArray[np.int64]:
    """Integer counts per row of ``cond·sizes``: floor or ceiling per cell, rows summing to
    ``sizes``, and each column's total close to its expectation.

    Groups are taken in a random order; in each, the cells rounded up are those whose value has
    received the fewest records relative to its expectation so far (ties broken at random).
    Column totals then stay within about one record of ``(cond·sizes).sum(axis=0)``, where
    independent rounding per group drifts by about √(groups)/2.

    Args:
        cond: (groups, values) conditional distributions, rows summing to 1.
        sizes: (groups,) records in each group.
        rng: the release's generator (the order of groups and the tie-breaks).

    >>> rng = np.random.default_rng(0)
    >>> out = round_balanced(np.full((4, 3), 1 / 3), np.array([1, 1, 1, 1]), rng)
    >>> out.sum(axis=1).tolist(), sorted(out.sum(axis=0).tolist())
    ([1, 1, 1, 1], [1, 1, 2])
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    order = rng.permutation(cond.shape[0]).astype(np.int64)
    tiebreak = rng.random(cond.shape[1]) * 1e-9
    out: NDArray[np.int64] = _balanced_kernel(
        np.ascontiguousarray(cond, dtype=np.float64), sizes, order, tiebreak
    )
    invariant(bool((out >= 0).all()), "negative rounded count")
    invariant(bool((out.sum(axis=1) == sizes).all()), "rounded counts do not add up")
    return out


def _conditional(table: Table, given: list[int], axis: int) -> Table:
    """A clique table as (cells of the ``given`` axes, in that order) x (values of ``axis``),
    each row normalised (uniform where the model puts no mass)."""
    keep = sorted([*given, axis])
    others = tuple(a for a in range(table.ndim) if a not in keep)
    projected = table.sum(axis=others) if others else table
    moved = np.transpose(projected, [keep.index(a) for a in given] + [keep.index(axis)])
    flat = moved.reshape(-1, moved.shape[-1])
    sums = flat.sum(axis=1, keepdims=True)
    cond: Table = np.divide(flat, sums, out=np.full_like(flat, 1.0 / flat.shape[1]), where=sums > 0)
    return cond


def sample_records(
    model: FittedModel,
    n: int,
    *,
    rng: np.random.Generator,
    dtype: type[np.signedinteger[Any]] = np.int64,
) -> NDArray[np.signedinteger[Any]]:
    """``n`` records as category indices (n, d) drawn from ``model`` with balanced rounding.

    ``dtype`` is the records' (the same draws and values in any signed integer type holding
    every category: int32 keeps 2M records of 11 columns in 88 MB instead of 176).
    """
    tree = model.tree
    d = len(tree.sizes)
    invariant(
        max(tree.sizes) - 1 <= np.iinfo(dtype).max, f"{np.dtype(dtype)} holds too few categories"
    )
    out = np.zeros((n, d), dtype=dtype)
    if n == 0:
        return out
    for j, clique in enumerate(tree.cliques):
        placed = [c for c in tree.separator(j)] if j > 0 else []
        for c in clique:
            if c in placed:
                continue
            cond = _conditional(
                model.marginals[j], [clique.index(p) for p in placed], clique.index(c)
            )
            if placed:
                shape = tuple(tree.sizes[p] for p in placed)
                group = np.ravel_multi_index(tuple(out[:, p] for p in placed), shape)
            else:
                group = np.zeros(n, dtype=np.int64)
            sizes = np.bincount(group, minlength=cond.shape[0]).astype(np.int64)
            alloc = round_balanced(cond, sizes, rng)
            shuffled = rng.permutation(n)  # a fresh random order within every group
            order = shuffled[np.argsort(group[shuffled], kind="stable")]
            del group, shuffled
            # the values straight into the records' column (no n-long int64 column between)
            out[order, c] = np.repeat(
                np.tile(np.arange(cond.shape[1], dtype=dtype), cond.shape[0]),
                alloc.reshape(-1),
            )
            del order
            placed.append(c)
    return out
