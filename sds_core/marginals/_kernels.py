"""Compiled inner loops of DP aggregation (used by :mod:`sds_core.marginals.combinations`,
:mod:`sds_core.marginals.contributions` and :mod:`sds_core.marginals.engine`; the CDT and
normalisation kernels live in :mod:`sds_core.dp.noise` and :mod:`sds_core.marginals.normalization`).

Each kernel returns exactly what the numpy code it replaces returns (the callers keep that code
as the fallback when numba is absent and the tests compare both); they only avoid the big
temporaries and repeated passes of the vectorized form.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from sds_core._jit import HAVE_NUMBA, _jit
from sds_core.marginals._count_kernels import CliqueKey

__all__ = [
    "HAVE_NUMBA",
    "CliqueKey",
    "DistinctRows",
    "JoinPlan",
    "SortedKeys",
    "clique_order",
    "count_clique_dense",
    "count_clique_sorted",
    "distinct_rows",
    "join_fill",
    "join_keep",
    "join_survivors",
    "key_buckets",
    "noisy_survivors",
    "packed_count_text_keys",
    "present_attributes",
    "row_local_keys",
    "rows_ascending",
]


class JoinPlan(NamedTuple):
    """The Apriori join of the sorted (k−1)-survivors ``prev`` into k-candidates.

    Row i joins every row j in ``block_end[i] .. group_end[i]`` (same first k−2 attributes,
    last attribute in a later column); pair t = ``offsets[i] + (j − block_end[i])``.
    ``prefix_keys`` are the rows' first k−2 attributes as keys in ``base`` (ascending).
    """

    prev: NDArray[np.int32]
    prefix_keys: NDArray[np.int64]
    block_end: NDArray[np.int64]
    group_end: NDArray[np.int64]
    offsets: NDArray[np.int64]
    base: int


class DistinctRows(NamedTuple):
    """A partition's distinct records, transposed ``(n_columns, n)``, and their multiplicities."""

    codes_t: NDArray[np.int32]
    weight: NDArray[np.int64]


class SortedKeys(NamedTuple):
    """Sorted candidate keys with a bucket index: ``start[b]`` = #{keys < b << shift}."""

    keys: NDArray[np.int64]
    start: NDArray[np.int64]
    shift: int


@_jit
def join_keep(plan: JoinPlan) -> np.ndarray:
    """Apriori join check: which joined pairs have every dropped-prefix subset in ``prev``.

    Pair t joins row i with row j; the candidate is prev[i] + prev[j, −1]. For every prefix
    position d, the subset without d has the prefix prev[i] minus d (rows [lo, hi) of ``prev``
    by ``prefix_keys``, whose last attributes ascend) and the last attribute prev[j, −1]
    (ascending in j), so one merge per (i, d) does.
    """
    prev, prefix_keys, base = plan.prev, plan.prefix_keys, plan.base
    m, km1 = prev.shape
    p = km1 - 1
    total = plan.offsets[m]
    keep = np.ones(total, dtype=np.bool_)
    for i in range(m):
        b0 = plan.block_end[i]
        b1 = plan.group_end[i]
        if b1 <= b0:
            continue
        base_t = plan.offsets[i] - b0
        for d in range(p):
            key = np.int64(0)
            for q in range(km1):
                if q != d:
                    key = key * base + np.int64(prev[i, q])
            lo = np.searchsorted(prefix_keys, key, side="left")
            hi = np.searchsorted(prefix_keys, key, side="right")
            first = prev[b0, km1 - 1]
            ptr = lo
            top = hi
            while ptr < top:  # jump to the first partner's last attribute, then merge
                mid = (ptr + top) >> 1
                if prev[mid, km1 - 1] < first:
                    ptr = mid + 1
                else:
                    top = mid
            for j in range(b0, b1):
                t = base_t + j
                if not keep[t]:
                    continue
                target = prev[j, km1 - 1]
                while ptr < hi and prev[ptr, km1 - 1] < target:
                    ptr += 1
                if ptr >= hi or prev[ptr, km1 - 1] != target:
                    keep[t] = False
    return keep


@_jit
def join_fill(plan: JoinPlan, keep: np.ndarray, n_out: np.int64) -> np.ndarray:
    """The kept joined candidates (n_out, k), in (i, j) order (= lexicographic order)."""
    prev = plan.prev
    m, km1 = prev.shape
    out = np.empty((n_out, km1 + 1), dtype=np.int32)
    r = 0
    for i in range(m):
        b0 = plan.block_end[i]
        for j in range(b0, plan.group_end[i]):
            if keep[plan.offsets[i] + j - b0]:
                for q in range(km1):
                    out[r, q] = prev[i, q]
                out[r, km1] = prev[j, km1 - 1]
                r += 1
    return out


@_jit
def join_survivors(
    plan: JoinPlan, keep: np.ndarray, noisy: np.ndarray, threshold: float
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`noisy_survivors` of ``join_fill(plan, keep, len(noisy))`` without building it:
    the joined candidates are walked in the same (i, j) order, candidate r has noisy count
    ``noisy[r]``, and only the rows kept are written."""
    prev = plan.prev
    m, km1 = prev.shape
    n_keep = 0
    for r in range(noisy.shape[0]):
        v = noisy[r]
        if v > threshold and v > 0:
            n_keep += 1
    attrs = np.empty((n_keep, km1 + 1), dtype=np.int32)
    kept = np.empty(n_keep, dtype=np.int64)
    r = 0
    out = 0
    for i in range(m):
        b0 = plan.block_end[i]
        for j in range(b0, plan.group_end[i]):
            if keep[plan.offsets[i] + j - b0]:
                v = noisy[r]
                if v > threshold and v > 0:
                    for q in range(km1):
                        attrs[out, q] = prev[i, q]
                    attrs[out, km1] = prev[j, km1 - 1]
                    kept[out] = v
                    out += 1
                r += 1
    return attrs, kept


@_jit
def row_local_keys(
    cands: np.ndarray, rows: np.ndarray, digit_offset: np.ndarray, mult: np.ndarray
) -> tuple[np.ndarray, bool]:
    """Local keys Σ (cands[rows[i], q] − digit_offset[q])·mult[q] and whether they ascend."""
    k = mult.shape[0]
    keys = np.empty(rows.shape[0], dtype=np.int64)
    ascending = True
    for i in range(rows.shape[0]):
        r = rows[i]
        key = np.int64(0)
        for q in range(k):
            key += (np.int64(cands[r, q]) - digit_offset[q]) * mult[q]
        keys[i] = key
        if i > 0 and key < keys[i - 1]:
            ascending = False
    return keys, ascending


@_jit
def present_attributes(
    codes: np.ndarray, offsets: np.ndarray, n_attributes: np.int64
) -> np.ndarray:
    """Which global attribute ids (offsets[c] + code) occur in the (n, n_columns) codes."""
    present = np.zeros(n_attributes, dtype=np.bool_)
    for r in range(codes.shape[0]):
        for c in range(codes.shape[1]):
            v = codes[r, c]
            if v >= 0:
                present[offsets[c] + v] = True
    return present


@_jit
def rows_ascending(rows: np.ndarray) -> bool:
    """Whether the rows are strictly ascending in lexicographic order (sorted and unique)."""
    m, k = rows.shape
    for r in range(1, m):
        for q in range(k):
            a = rows[r - 1, q]
            b = rows[r, q]
            if a < b:
                break
            if a > b or q == k - 1:
                return False
    return True


@_jit
def _clique_rank(
    attrs: np.ndarray, r: np.int64, attr_col: np.ndarray, binom: np.ndarray
) -> np.int64:
    """Colex rank Σ C(c_q, q + 1) of row r's ascending columns c_q (a bijection onto
    0..C(d, k) − 1); -1 when its columns do not strictly ascend."""
    s = np.int64(0)
    last = -1
    for q in range(attrs.shape[1]):
        c = attr_col[attrs[r, q]]
        if c <= last:
            return np.int64(-1)
        last = c
        s += binom[c, q + 1]
    return s


@_jit
def clique_order(
    attrs: np.ndarray, attr_col: np.ndarray, binom: np.ndarray, n_ranks: np.int64
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Stable counting sort of the rows by clique rank: (order, start of each rank in it, ok).

    ``ok`` is False (and the rest unusable) when some row is not a combination.
    """
    m = attrs.shape[0]
    start = np.zeros(n_ranks + 1, dtype=np.int64)
    order = np.empty(0, dtype=np.int64)
    for r in range(m):
        v = _clique_rank(attrs, r, attr_col, binom)
        if v < 0:
            return order, start, False
        start[v + 1] += 1
    for v in range(n_ranks):
        start[v + 1] += start[v]
    fill = start[:-1].copy()
    order = np.empty(m, dtype=np.int64)
    for r in range(m):
        v = _clique_rank(attrs, r, attr_col, binom)
        order[fill[v]] = r
        fill[v] += 1
    return order, start, True


@_jit
def _clique_keys(codes_t: np.ndarray, key: CliqueKey) -> np.ndarray:
    """Local key of every record of the partition (digit = code + 1), column by column."""
    n = codes_t.shape[1]
    keys = np.zeros(n, dtype=np.int64)
    for q in range(key.cols.shape[0]):
        col = codes_t[key.cols[q]]
        mq = key.mult[q]
        for r in range(n):
            keys[r] += (np.int64(col[r]) + 1) * mq
    return keys


@_jit
def count_clique_dense(
    rows: DistinctRows, key: CliqueKey, table: np.ndarray, acc1: np.ndarray, valid: np.ndarray
) -> None:
    """``acc1[1 + table[k]] += weight[r]`` and ``valid[r] += table[k] >= 0`` for every row r.

    ``k`` is the row's local key in the clique; ``acc1[0]`` collects the rows whose key is no
    candidate (branch-free counting), ``acc1[1 + i]`` local index i.
    """
    keys = _clique_keys(rows.codes_t, key)
    weight = rows.weight
    for r in range(keys.shape[0]):
        idx = table[keys[r]]
        acc1[idx + 1] += weight[r]
        valid[r] += idx >= 0


@_jit
def count_clique_sorted(
    rows: DistinctRows, key: CliqueKey, index: SortedKeys, acc1: np.ndarray, valid: np.ndarray
) -> None:
    """As :func:`count_clique_dense` with a search in the sorted candidate keys, started from
    the bucket of the record's key ``>> shift``."""
    rec_keys = _clique_keys(rows.codes_t, key)
    weight, keys, bucket_start, shift = rows.weight, index.keys, index.start, index.shift
    n_keys = keys.shape[0]
    top = keys[n_keys - 1] if n_keys > 0 else np.int64(-1)
    for r in range(rec_keys.shape[0]):
        k = rec_keys[r]
        if k > top:
            acc1[0] += weight[r]
            continue
        b = k >> shift
        lo = bucket_start[b]
        hi = bucket_start[b + 1]
        while lo < hi:
            mid = (lo + hi) >> 1
            if keys[mid] < k:
                lo = mid + 1
            else:
                hi = mid
        idx = -1
        if lo < bucket_start[b + 1] and keys[lo] == k:
            idx = lo
        acc1[idx + 1] += weight[r]
        valid[r] += idx >= 0


@_jit
def _slot(key: np.int64, shift: np.uint64) -> np.int64:
    return np.int64((np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> shift)


@_jit
def distinct_rows(codes: np.ndarray, mult: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first row of each distinct row, its multiplicity, distinct index of every row).

    Rows are keyed by Σ (code + 1)·mult[c] (injective: the caller's radices exceed every
    code + 1) and found in an open-addressing table (Fibonacci hashing, linear probing) that
    doubles when half full, so repetitive data keeps a small, cache-resident table; distinct
    rows are numbered in order of first occurrence.
    """
    n, d = codes.shape
    bits = 10
    shift = np.uint64(64 - bits)
    mask = (np.int64(1) << bits) - 1
    slot_key = np.full(mask + 1, -1, dtype=np.int64)
    slot_id = np.empty(mask + 1, dtype=np.int32)
    first = np.empty(n, dtype=np.int64)
    dkeys = np.empty(n, dtype=np.int64)
    weight = np.zeros(n, dtype=np.int64)
    inverse = np.empty(n, dtype=np.int32)
    n_distinct = 0
    for r in range(n):
        key = np.int64(0)
        for c in range(d):
            key += (np.int64(codes[r, c]) + 1) * mult[c]
        s = _slot(key, shift)
        while slot_key[s] != -1 and slot_key[s] != key:
            s = (s + 1) & mask
        if slot_key[s] == -1:
            slot_key[s] = key
            slot_id[s] = n_distinct
            first[n_distinct] = r
            dkeys[n_distinct] = key
            n_distinct += 1
            i = n_distinct - 1
            if 2 * n_distinct > mask + 1:  # grow: re-insert every distinct key
                bits += 1
                shift = np.uint64(64 - bits)
                mask = (np.int64(1) << bits) - 1
                slot_key = np.full(mask + 1, -1, dtype=np.int64)
                slot_id = np.empty(mask + 1, dtype=np.int32)
                for j in range(n_distinct):
                    t = _slot(dkeys[j], shift)
                    while slot_key[t] != -1:
                        t = (t + 1) & mask
                    slot_key[t] = dkeys[j]
                    slot_id[t] = j
        else:
            i = slot_id[s]
        weight[i] += 1
        inverse[r] = i
    return first[:n_distinct].copy(), weight[:n_distinct].copy(), inverse


def key_buckets(keys: np.ndarray, max_buckets: int = 1 << 20) -> SortedKeys:
    """The sorted non-negative ``keys`` with their bucket index for :func:`count_clique_sorted`:
    buckets of 2**shift keys cover 0..keys[-1], at most ~``max_buckets`` and ~2 keys each."""
    top = int(keys[-1]) if keys.shape[0] else 0
    target = max(1, min(max_buckets, 2 * keys.shape[0]))
    shift = 0
    while ((top >> shift) + 1) > target:
        shift += 1
    bounds = np.arange((top >> shift) + 2, dtype=np.int64) << shift
    return SortedKeys(keys, np.searchsorted(keys, bounds, side="left").astype(np.int64), shift)


@_jit
def noisy_survivors(
    cands: np.ndarray, noisy: np.ndarray, threshold: float
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``cands`` whose noisy count is > threshold and > 0, with it.

    The comparison with the float ``threshold`` is made in float64, as numpy does.
    """
    m, k = cands.shape
    n_keep = 0
    for i in range(m):
        v = noisy[i]
        if v > threshold and v > 0:
            n_keep += 1
    attrs = np.empty((n_keep, k), dtype=np.int32)
    kept = np.empty(n_keep, dtype=np.int64)
    j = 0
    for i in range(m):
        v = noisy[i]
        if v > threshold and v > 0:
            for q in range(k):
                attrs[j, q] = cands[i, q]
            kept[j] = v
            j += 1
    return attrs, kept


@_jit
def packed_count_text_keys(
    attrs: NDArray[np.int32],
    counts: NDArray[np.int64],
    rank: NDArray[np.int64],
    joined_of: NDArray[np.int64],
    top: int,
    bits: int,
) -> NDArray[np.int64]:
    """Per row (:func:`sds_core.marginals.aggregates.count_text_order`): ``top - count``,
    then the row's attribute ranks ascending, each but the last as the rank of its text joined
    with ";" (``joined_of``), ``bits`` bits each."""
    m, k = attrs.shape
    out = np.empty(m, dtype=np.int64)
    r = np.empty(k, dtype=np.int64)
    for i in range(m):
        for j in range(k):  # insertion sort of k ranks (k <= the reporting length)
            v = rank[attrs[i, j]]
            p = j
            while p > 0 and r[p - 1] > v:
                r[p] = r[p - 1]
                p -= 1
            r[p] = v
        key = np.int64(top - counts[i])
        for j in range(k - 1):
            key = (key << bits) | joined_of[r[j]]
        out[i] = (key << bits) | r[k - 1]
    return out
