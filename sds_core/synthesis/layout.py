"""The aggregates laid out as flat arrays for the synthesis kernels (used by
sds_core.synthesis.generator): one :class:`Layout` bundle, which the kernels take as it is.

Counts of every length in one array (lengths ascending, rows in AggregateSet order), the
1-combination index of each attribute, a dense pair table for small domains, CSR lists of the
triples holding each pair (third attributes ascending, split by column), and an open-addressing
hash table over all combination keys (with its compiled :func:`lookup`), built only when a kernel
can need it.
"""

from __future__ import annotations

from math import ceil, log2
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from sds_core._jit import _jit
from sds_core.errors import require
from sds_core.marginals.aggregates import AggregateSet
from sds_core.synthesis._bitsets import Bitsets, build_bitsets, disabled_bitsets
from sds_core.synthesis.sizes import check_key_width

DENSE_PAIR_LIMIT = 2048
"""Domains with at most this many attributes look pairs up in a dense table (<= 32 MiB)."""


class HashTable(NamedTuple):
    """Open-addressing table ``key -> combination index`` (2**bits slots, -1 = empty).

    A combination's key is the Horner sum over its ascending attribute ids + 1 in ``base``
    (= number of attributes + 1), so keys of different lengths never collide.
    """

    keys: NDArray[np.int64]
    vals: NDArray[np.int64]
    bits: int
    base: int


@_jit
def _slot(key: np.int64, bits: np.int64) -> np.int64:
    """Fibonacci hash of ``key`` to ``bits`` bits."""
    h = np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)
    return np.int64(h >> np.uint64(64 - bits))


@_jit
def _build_table(keys: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Keys and values of the :class:`HashTable` ``keys[i] -> i`` (linear probing)."""
    size = 1 << bits
    mask = size - 1
    tkeys = np.full(size, -1, dtype=np.int64)
    tvals = np.full(size, -1, dtype=np.int64)
    for i in range(keys.shape[0]):
        s = _slot(keys[i], bits)
        while tkeys[s] != -1:
            s = (s + 1) & mask
        tkeys[s] = keys[i]
        tvals[s] = i
    return tkeys, tvals


@_jit
def lookup(table: HashTable, key: np.int64) -> np.int64:
    """Index of the combination with ``key`` in ``table``, -1 if absent."""
    mask = (1 << table.bits) - 1
    s = _slot(key, table.bits)
    while True:
        k = table.keys[s]
        if k == key:
            v: np.int64 = table.vals[s]
            return v
        if k == -1:
            return np.int64(-1)
        s = (s + 1) & mask


class TripleLists(NamedTuple):
    """CSR lists of the triples holding each reported pair (dense pair table and R >= 3 only).

    Pair p's triples are at positions ``start[p]:start[p + 1]`` (one entry per combination + 1;
    length 1 when disabled), third attributes ascending: ``third`` (third attribute), ``combo``
    (triple index), ``count`` (its count, copied so the walk reads memory in order; int32 unless
    a count could overflow). ``pos[t]`` lists the 3 positions of triple ``first + t``;
    ``col_start[(p - pair_first) * n_cols + c]`` is the first position of pair p's list whose
    third attribute is in column >= c.
    """

    start: NDArray[np.int64]
    third: NDArray[np.int32]
    combo: NDArray[np.int32]
    count: NDArray[np.int32] | NDArray[np.int64]  # type: ignore[assignment]  # shadows tuple.count
    pos: NDArray[np.int32]
    first: int
    col_start: NDArray[np.int32]


class Layout(NamedTuple):
    """Aggregates flattened for the kernels (see the module docstring); read-only there.

    Attributes:
        reporting_length: R, the longest combination length in the aggregates.
        attr_col: column of every attribute id.
        col_lo: first attribute id of every column.
        col_hi: one past the last attribute id of every column.
        counts: every combination's (scaled) count, lengths ascending.
        idx1: index in ``counts`` of each attribute's 1-combination, -1 when unreported.
        budget: each attribute's budget at the start of a budget cycle (its 1-count, else 0).
        table: every combination by key (a 16-slot empty table when no kernel needs it: dense
            pairs and R <= 3).
        pair_idx: with a dense pair table, ``pair_idx[a * n_attr + b]`` is the index of pair
            {a, b} (-1 if unreported; int32); else a dummy of length 1.
        dense_pairs: whether ``pair_idx`` is the dense table (else pairs go through ``table``).
        pair_first: index in ``counts`` of the first pair.
        triples: the CSR lists of the triples of each pair.
        bitsets: the candidate bitsets of the completion kernel.
    """

    reporting_length: int
    attr_col: NDArray[np.int64]
    col_lo: NDArray[np.int64]
    col_hi: NDArray[np.int64]
    counts: NDArray[np.int64]
    idx1: NDArray[np.int64]
    budget: NDArray[np.int64]
    table: HashTable
    pair_idx: NDArray[np.int32]
    dense_pairs: bool
    pair_first: int
    triples: TripleLists
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
    check_key_width(n_attr, R)
    attr_col32 = np.asarray(domain.attribute_columns())
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
                bool((np.diff(attr_col32[attrs], axis=1) > 0).all()),
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
        tkeys, tvals = _build_table(all_keys, bits)
    else:
        bits = 4
        tkeys, tvals = np.full(16, -1, dtype=np.int64), np.full(16, -1, dtype=np.int64)
    col_lo = np.asarray(domain.offsets[:-1], dtype=np.int64)
    col_hi = np.asarray(domain.offsets[1:], dtype=np.int64)
    attr_col = attr_col32.astype(np.int64)
    triples = _triples_by_pair(
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
        bitsets = build_bitsets(
            col_sizes=col_hi - col_lo,
            attr_col=attr_col,
            col_lo=col_lo,
            idx1=idx1,
            pairs=attrs_by_len.get(2),
            csr_start=triples.start,
            third=triples.third,
            pair_first=first.get(2, 0),
            n_pairs=len(attrs_by_len[2]) if 2 in attrs_by_len else 0,
        )
    budget = np.zeros(n_attr, dtype=np.int64)
    has1 = idx1 >= 0
    budget[has1] = all_counts[idx1[has1]]
    return Layout(
        reporting_length=R,
        attr_col=attr_col,
        col_lo=col_lo,
        col_hi=col_hi,
        counts=all_counts,
        idx1=idx1,
        budget=budget,
        table=HashTable(tkeys, tvals, bits, base),
        pair_idx=pair_idx,
        dense_pairs=dense,
        pair_first=first.get(2, 0),
        triples=triples,
        bitsets=bitsets,
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
    pair_idx: NDArray[np.int32],
    counts: NDArray[np.int64],
    attr_col: NDArray[np.int64],
    n_cols: int,
    enabled: bool,
) -> TripleLists:
    """CSR lists for the kernels: for each reported pair, the third attribute of its triples.

    Dummies when disabled (no dense pair table or R < 3) or without triples.
    """
    if not enabled or triples is None or not len(triples):
        z32 = np.zeros(0, np.int32)
        return TripleLists(
            np.zeros(1, np.int64),
            z32,
            z32,
            z32,  # int32 as when enabled: one compiled specialization of each kernel, not two
            np.zeros((0, 3), np.int32),
            0,
            np.zeros(1, np.int32),
        )
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
        attr_col,
        n_cols,
    )
    # int32 copies for the walk (half the memory traffic) unless a count could overflow
    small = counts.size == 0 or int(counts.max()) < 2**30
    csr_count = counts[combo].astype(np.int32 if small else np.int64)
    return TripleLists(start, third, combo, csr_count, trip_pos, t_first, pcs)
