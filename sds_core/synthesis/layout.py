"""The aggregates laid out as flat arrays for the synthesis kernels (used by
sds_core.synthesis.generator).

Counts of every length in one array (lengths ascending, rows in AggregateSet order), the
1-combination index of each attribute, a dense pair table for small domains, CSR lists of the
triples holding each pair (third attributes ascending, split by column), and an open-addressing
hash table over all combination keys, built only when a kernel can need it.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil, log2
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sds_core._jit import _jit
from sds_core.errors import SdsInputError, require
from sds_core.marginals.aggregates import AggregateSet
from sds_core.synthesis._bitsets import Bitsets, build_bitsets, disabled_bitsets
from sds_core.synthesis._reference_kernel import build_table

DENSE_PAIR_LIMIT = 2048
"""Domains with at most this many attributes look pairs up in a dense table (<= 32 MiB)."""


@dataclass(frozen=True, slots=True, eq=False)
class Layout:
    """Aggregates flattened for the kernels (see the module docstring)."""

    counts: NDArray[np.int64]
    idx1: NDArray[np.int64]
    tkeys: NDArray[np.int64]
    tvals: NDArray[np.int64]
    bits: int
    base: int
    pair_idx: NDArray[np.int64]
    csr: tuple[Any, ...]
    pair_col_start: NDArray[np.int64]
    pair_first: int
    bitsets: Bitsets


def _keys(attrs: NDArray[np.int64], base: int) -> NDArray[np.int64]:
    key = np.zeros(attrs.shape[0], dtype=np.int64)
    for j in range(attrs.shape[1]):
        key = key * base + attrs[:, j] + 1
    return key


def build_layout(aggregates: AggregateSet, scale: float | None) -> Layout:
    """Validate ``aggregates`` for synthesis and lay them out (counts scaled by ``scale``)."""
    domain = aggregates.domain
    n_attr = domain.n_attributes
    base = n_attr + 1
    R = aggregates.reporting_length
    if R * log2(base) >= 62.9:
        raise SdsInputError(
            f"{n_attr} attributes with reporting_length {R}: combination keys overflow int64; "
            "bin or merge high-cardinality columns, or lower the reporting length"
        )
    attr_col = np.asarray(domain.attribute_columns())
    attrs_by_len: dict[int, NDArray[np.int64]] = {}
    first: dict[int, int] = {}
    counts: list[NDArray[np.int64]] = []
    idx1 = np.full(n_attr, -1, dtype=np.int64)
    size = 0
    for k in sorted(aggregates.by_len):
        cc = aggregates.by_len[k]
        if k > R or len(cc) == 0:
            continue
        attrs = cc.attrs.astype(np.int64)
        require(
            bool((attrs >= 0).all() and (attrs < n_attr).all()),
            f"aggregates of length {k} hold attribute ids outside the domain (0..{n_attr - 1})",
        )
        if k > 1:
            require(
                bool((np.diff(attrs, axis=1) > 0).all()),
                f"aggregates of length {k}: attribute ids in a combination must be ascending",
            )
            require(
                bool((np.diff(attr_col[attrs], axis=1) > 0).all()),
                f"aggregates of length {k}: a combination uses two values of one column",
            )
        c = cc.counts.astype(np.int64)
        require(
            bool((c > 0).all()),
            f"aggregates of length {k} contain counts <= 0; drop them before synthesis",
        )
        if scale is not None:
            c = np.ceil(c * float(scale)).astype(np.int64)
        # keys of one length are unique iff sorted keys never repeat (rows are normally sorted
        # already); keys of different lengths cannot collide (k digits in 1..n_attr, base n+1)
        key = _keys(attrs, base)
        ordered = key if bool((key[1:] > key[:-1]).all()) else np.sort(key)
        require(
            bool((ordered[1:] != ordered[:-1]).all()),
            "aggregates contain a combination twice; each combination must appear once",
        )
        if k == 1:
            idx1[attrs[:, 0]] = size + np.arange(len(cc))
        attrs_by_len[k], first[k] = attrs, size
        counts.append(c)
        size += len(cc)
    all_counts = np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64)
    dense = R >= 2 and n_attr <= DENSE_PAIR_LIMIT
    pair_idx = np.full(1, -1, dtype=np.int32)
    if dense:
        table = np.full((n_attr, n_attr), -1, dtype=np.int32)  # int32: half the cache lines
        if 2 in attrs_by_len:
            pairs = attrs_by_len[2]
            slots = first[2] + np.arange(pairs.shape[0], dtype=np.int32)
            table[pairs[:, 0], pairs[:, 1]] = slots
            table[pairs[:, 1], pairs[:, 0]] = slots
        pair_idx = table.ravel()
    # the hash table answers what the dense pairs and the CSR lists cannot: pairs of large
    # domains and combinations of length >= 4 (an empty table answers "unreported")
    if (R >= 2 and not dense) or R >= 4:
        all_keys = np.concatenate([_keys(attrs_by_len[k], base) for k in sorted(attrs_by_len)])
        bits = max(4, ceil(log2(max(2 * all_keys.size, 2))) + 1)
        tkeys, tvals = build_table(all_keys, bits)
    else:
        bits = 4
        tkeys, tvals = np.full(16, -1, dtype=np.int64), np.full(16, -1, dtype=np.int64)
    csr, pcs = _triples_by_pair(
        attrs_by_len.get(3),
        first.get(3, 0),
        first.get(2, 0),
        pair_idx,
        all_counts,
        attr_col,
        domain.n_columns,
        dense and R >= 3,
    )
    bitsets = disabled_bitsets(domain.n_columns)
    if dense:
        n_pairs = len(attrs_by_len[2]) if 2 in attrs_by_len else 0
        bitsets = build_bitsets(
            np.diff(np.asarray(domain.offsets, dtype=np.int64)),
            attr_col.astype(np.int64),
            np.asarray(domain.offsets[:-1], dtype=np.int64),
            idx1,
            attrs_by_len.get(2),
            csr[0],
            csr[1],
            first.get(2, 0),
            n_pairs,
        )
    return Layout(
        all_counts, idx1, tkeys, tvals, bits, base, pair_idx, csr, pcs, first.get(2, 0), bitsets
    )


@_jit
def _fill_csr(
    triples: np.ndarray,
    t_first: int,
    pair_idx: np.ndarray,
    n_attr: int,
    size: int,
    pair_first: int,
    n_pairs: int,
    attr_col: np.ndarray,
    n_cols: int,
) -> tuple[np.ndarray, ...]:
    """CSR lists by pair index, third attributes ascending within each list (counting sorts)."""
    m3 = triples.shape[0]
    ii = (0, 0, 1)
    jj = (1, 2, 2)
    kk = (2, 1, 0)
    start = np.zeros(size + 1, dtype=np.int64)
    by_third = np.zeros(n_attr + 1, dtype=np.int64)
    for t in range(m3):
        for q in range(3):
            p = pair_idx[triples[t, ii[q]] * n_attr + triples[t, jj[q]]]
            if p >= 0:
                start[p + 1] += 1
                by_third[triples[t, kk[q]] + 1] += 1
    for i in range(size):
        start[i + 1] += start[i]
    for i in range(n_attr):
        by_third[i + 1] += by_third[i]
    n = start[size]
    # pass 1: entries (triple * 3 + slot) ordered by third attribute
    order = np.empty(n, dtype=np.int64)
    for t in range(m3):
        for q in range(3):
            p = pair_idx[triples[t, ii[q]] * n_attr + triples[t, jj[q]]]
            if p >= 0:
                z = triples[t, kk[q]]
                order[by_third[z]] = t * 3 + q
                by_third[z] += 1
    # pass 2: stable scatter into the pair lists
    fill = start[:-1].copy()
    third = np.empty(n, dtype=np.int32)
    combo = np.empty(n, dtype=np.int32)
    trip_pos = np.full((m3, 3), -1, dtype=np.int32)
    for e in range(n):
        t, q = order[e] // 3, order[e] % 3
        p = pair_idx[triples[t, ii[q]] * n_attr + triples[t, jj[q]]]
        pos = fill[p]
        fill[p] += 1
        third[pos] = triples[t, kk[q]]
        combo[pos] = t_first + t
        trip_pos[t, q] = pos
    # pair_col_start[(p - pair_first) * n_cols + c]: first position of pair p's list whose third
    # attribute is in column >= c (so column c's thirds are [.. c], [.. c + 1]) )
    pcs = np.empty(n_pairs * n_cols + 1, dtype=np.int32)
    for pl in range(n_pairs):
        p = pair_first + pl
        e = start[p]
        for c in range(n_cols):
            while e < start[p + 1] and attr_col[third[e]] < c:
                e += 1
            pcs[pl * n_cols + c] = e
    pcs[n_pairs * n_cols] = n
    return start, third, combo, trip_pos, pcs


def _triples_by_pair(
    triples: NDArray[np.int64] | None,
    t_first: int,
    pair_first: int,
    pair_idx: NDArray[np.int64],
    counts: NDArray[np.int64],
    attr_col: NDArray[np.int64],
    n_cols: int,
    enabled: bool,
) -> tuple[tuple[Any, ...], NDArray[np.int64]]:
    """CSR lists for the kernels: for each reported pair, the third attribute of its triples.

    Returns ((start, third attribute, triple index, triple count, synthetic count (zeros),
    CSR positions of each triple (m3, 3), index of the first triple), pair-column starts);
    dummies when disabled (no dense pair table or R < 3) or without triples.
    """
    if not enabled or triples is None or not len(triples):
        z64, z32 = np.zeros(0, np.int64), np.zeros(0, np.int32)
        dummy = (np.zeros(1, np.int64), z32, z32, z64, z64.copy(), np.zeros((0, 3), np.int32), 0)
        return dummy, np.zeros(1, np.int32)
    n_attr = attr_col.shape[0]
    n_pairs = int(np.count_nonzero(pair_idx >= 0)) // 2
    start, third, combo, trip_pos, pcs = _fill_csr(
        triples,
        t_first,
        pair_idx,
        n_attr,
        counts.size,
        pair_first,
        n_pairs,
        attr_col.astype(np.int64),
        n_cols,
    )
    # int32 copies for the walk (half the memory traffic) unless a count could overflow
    small = counts.size == 0 or int(counts.max()) < 2**30
    csr_count = counts[combo].astype(np.int32 if small else np.int64)
    csr = (start, third, combo, csr_count, np.zeros(third.size, csr_count.dtype), trip_pos, t_first)
    return csr, pcs
