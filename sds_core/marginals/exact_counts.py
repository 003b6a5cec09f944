"""Exact (non-private) aggregation: counts of every combination of length 1..R, and sensitivities.

Used by evaluation and tests; the result has ``is_dp=False`` and must never be released.
Counting goes clique by clique over mixed-radix local keys: cliques inside a group of
low-cardinality columns are sums of the group's joint counts, other small cliques take a
compiled pass into a dense array, big ones a map-reduce over record partitions (sort + unique).
"""

from __future__ import annotations

import itertools
from math import comb

import numpy as np
from numpy.typing import NDArray

from sds_core.data.table import PreparedTable
from sds_core.errors import require
from sds_core.marginals._count_kernels import (
    CliqueKey,
    compact_codes,
    count_dense,
    joint_groups,
    local_keys_of,
)
from sds_core.marginals.aggregates import AggregateSet, CombinationCounts
from sds_core.marginals.combinations import clique_multipliers, keys_to_attrs, use_dense, valid_keys

DEFAULT_CHUNK_RECORDS = 262_144
DENSE_BUDGET = 1 << 26
"""Largest dense counting array (entries); bigger cliques are counted by sorting."""


def _check_inputs(table: PreparedTable, reporting_length: int, chunk_records: int) -> None:
    require(
        isinstance(reporting_length, int) and reporting_length >= 1,
        f"reporting_length must be an integer >= 1, got {reporting_length!r}",
    )
    require(chunk_records >= 1, f"chunk_records must be >= 1, got {chunk_records!r}")
    require(table.n_records > 0, "the table is empty: aggregation needs at least one record")


def _merge_sparse(
    parts: list[tuple[NDArray[np.int64], NDArray[np.int64]]],
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Reduce step: sum the counts of equal keys over partitions."""
    if not parts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if len(parts) == 1:
        return parts[0]
    keys = np.concatenate([p[0] for p in parts])
    counts = np.concatenate([p[1] for p in parts])
    order = np.argsort(keys, kind="stable")
    keys, counts = keys[order], counts[order]
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    return keys[starts], np.add.reduceat(counts, starts)


def count_cliques(
    table: PreparedTable,
    cliques: list[tuple[int, ...]],
    *,
    chunk_records: int = DEFAULT_CHUNK_RECORDS,
    dense_budget: int = DENSE_BUDGET,
) -> dict[tuple[int, ...], tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """Exact counts per clique: ``{cols: (sorted local keys with count > 0, counts)}``.

    Keys are :func:`sds_core.marginals.combinations.local_keys` (digit 0 = empty cell; such keys are
    counted and dropped at the end, cheaper than testing every record). Cliques inside one of the
    :func:`~sds_core.marginals._count_kernels.joint_groups` (joint table <= n/16 cells) are sums of
    the group's joint counts (one pass per group). Other cliques are counted one at a time: small
    ones (and big ones on big data) in one compiled pass over the records into a dense array of at
    most ``dense_budget`` entries (reused from clique to clique); the rest map-reduce: every
    partition of ``chunk_records`` records is sorted and counted, and the lists are merged.
    ``dense_budget=0`` forces the map-reduce for every clique.
    """
    return _count(table, compact_codes(table.codes), cliques, chunk_records, dense_budget)


def _count(
    table: PreparedTable,
    codes: NDArray[np.integer],
    cliques: list[tuple[int, ...]],
    chunk_records: int,
    dense_budget: int,
) -> dict[tuple[int, ...], tuple[NDArray[np.int64], NDArray[np.int64]]]:
    """:func:`count_cliques` given the table's :func:`compact_codes`."""
    domain, n = table.domain, table.n_records
    plan = []
    for cols in cliques:
        mult, size = clique_multipliers(domain, cols)
        plan.append((cols, CliqueKey(np.asarray(cols, dtype=np.int64), mult), size))
    joint = _joint_counts(table, codes, cliques, min(dense_budget, n // 16))
    dense_sizes = [size for *_, size in plan if use_dense(size, n, 0, dense_budget)]
    # one counting array for every dense clique, cleared after each (int32 when counts fit)
    acc = np.zeros(max(dense_sizes, default=0), dtype=np.int32 if n < 1 << 31 else np.int64)
    out = {}
    for cols, key, size in plan:
        if cols in joint:
            out[cols] = _from_joint(*joint.pop(cols), cols, key.mult)
            continue
        if use_dense(size, n, 0, dense_budget):
            count_dense(codes, key, acc[:size])
            keys = np.flatnonzero(acc[:size]).astype(np.int64)
            counts = acc[keys].astype(np.int64)
            acc[keys] = 0
        else:
            parts = []
            for start in range(0, n, chunk_records):
                local = local_keys_of(codes[:, start : start + chunk_records], key)
                uk, uc = np.unique(local, return_counts=True)
                parts.append((uk, uc.astype(np.int64)))
            keys, counts = _merge_sparse(parts)
        ok = valid_keys(domain, cols, keys)  # drop records' keys with an empty cell
        out[cols] = (keys[ok], counts[ok])
    return out


def _joint_counts(
    table: PreparedTable, codes: NDArray[np.integer], cliques: list[tuple[int, ...]], limit: int
) -> dict[tuple[int, ...], tuple[tuple[int, ...], NDArray[np.int64]]]:
    """``{clique: (group, joint counts of the group)}`` for the cliques inside one of the
    :func:`joint_groups` (digit 0 = empty, one axis per column); a group's joint table is counted
    in one pass when at least two cliques take it."""
    radices = [c + 1 for c in table.domain.cardinalities]
    out: dict[tuple[int, ...], tuple[tuple[int, ...], NDArray[np.int64]]] = {}
    for group in joint_groups(radices, limit):
        inside = [cols for cols in cliques if cols not in out and set(cols) <= set(group)]
        if len(inside) < 2:
            continue
        shape = [radices[c] for c in group]
        mult = np.ones(len(group), dtype=np.int64)
        for i in range(len(group) - 2, -1, -1):
            mult[i] = mult[i + 1] * shape[i + 1]
        acc = np.zeros(int(np.prod(shape)), dtype=np.int64)
        count_dense(codes, CliqueKey(np.asarray(group, dtype=np.int64), mult), acc)
        for cols in inside:
            out[cols] = (group, acc.reshape(shape))
    return out


def _from_joint(
    group: tuple[int, ...], joint: NDArray[np.int64], cols: tuple[int, ...], mult: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Sorted local keys and counts of a clique inside the group, by summing the joint counts."""
    summed = joint.sum(axis=tuple(i for i, c in enumerate(group) if c not in cols))
    digits = np.nonzero(summed)
    valid = np.ones(digits[0].shape[0], dtype=bool)
    for d in digits:
        valid &= d > 0  # no empty cell
    keys = np.zeros(int(valid.sum()), dtype=np.int64)
    for d, m in zip(digits, mult, strict=True):
        keys += d[valid] * m
    counts = summed[digits][valid]
    order = np.argsort(keys, kind="stable")
    return keys[order], counts[order]


def exact_aggregates(
    table: PreparedTable, reporting_length: int, *, chunk_records: int = DEFAULT_CHUNK_RECORDS
) -> AggregateSet:
    """Exact counts of every combination of length 1..R present in the data (``is_dp=False``).

    Lengths above the number of columns are empty. Sensitive: never publish the result.

    Raises:
        SdsInputError: empty table, reporting_length < 1.
    """
    _check_inputs(table, reporting_length, chunk_records)
    domain = table.domain
    by_len: dict[int, CombinationCounts] = {}
    codes = compact_codes(table.codes)
    for k in range(1, reporting_length + 1):
        if k > domain.n_columns:
            by_len[k] = CombinationCounts.empty(k)
            continue
        cliques = list(itertools.combinations(range(domain.n_columns), k))
        counted = _count(table, codes, cliques, chunk_records, DENSE_BUDGET)
        attrs = [keys_to_attrs(domain, cols, keys) for cols, (keys, _) in counted.items()]
        counts = [c for _, c in counted.values()]
        by_len[k] = CombinationCounts.from_unsorted(
            np.concatenate(attrs) if attrs else np.zeros((0, k), dtype=np.int32),
            np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64),
        )
    return AggregateSet(domain, reporting_length, by_len, None, is_dp=False)


def record_sensitivities(table: PreparedTable, reporting_length: int) -> NDArray[np.int64]:
    """(n, R) array: column k−1 holds C(w_j, k), the number of k-tuples of record j.

    ``w_j`` is the number of non-empty attributes of record j (spec §0).

    >>> from sds_core.data.domain import Domain
    >>> d = Domain(("A", "B", "C"), (("a1", "a2"), ("b1", "b2"), ("c1", "c2")))
    >>> t = PreparedTable(d, np.array([[0, 0, 0], [0, 1, 0], [1, -1, 1]], dtype=np.int32))
    >>> record_sensitivities(t, 2)[:, 1].tolist()
    [3, 3, 1]
    """
    require(
        isinstance(reporting_length, int) and reporting_length >= 1,
        f"reporting_length must be an integer >= 1, got {reporting_length!r}",
    )
    w = (table.codes >= 0).sum(axis=1)
    d = table.domain.n_columns
    lut = np.array(
        [[comb(n, k) for k in range(1, reporting_length + 1)] for n in range(d + 1)],
        dtype=np.int64,
    ).reshape(d + 1, reporting_length)
    sens: NDArray[np.int64] = lut[w]
    return sens
