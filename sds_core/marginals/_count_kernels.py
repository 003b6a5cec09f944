"""Compiled record loops of exact counting and evaluation (used by
:mod:`sds_core.marginals.exact_counts` and :mod:`sds_core.evaluation.metrics`): clique counts,
rare-combination lookups and marginal differences.

Every loop reads a column-major ``(n_columns, n)`` code array and builds the mixed-radix keys
``sum((code + shift) * mult)`` of a :class:`CliqueKey` for a block of records at a time
(vectorizable, no per-clique key arrays). Functions are numba-compiled when numba is installed;
without it they run as plain (slow, same-result) Python.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from sds_core._jit import _jit

BLOCK = 2048
"""Records per key block (the block's keys stay in L1 cache)."""
LANES_BELOW = 1 << 12
"""Counting arrays smaller than this get 4 interleaved copies (no store-to-load stalls)."""


class CliqueKey(NamedTuple):
    """Mixed-radix key of a clique's combinations.

    Record r's key is ``sum((codes[cols[q], r] + shift) * mult[q])``; ``shift`` is the kernel's
    (1 where code -1, an empty cell, must give digit 0; else 0).
    """

    cols: NDArray[np.int64]
    mult: NDArray[np.int64]


class ComparedTables(NamedTuple):
    """Two column-major code tables compared cell by cell, each with its count weight.

    A marginal cell's difference is ``w_o * count_o - w_s * count_s`` (e.g. ``w_o`` = the
    synthetic record count and ``w_s`` = the original one, to compare proportions exactly).
    """

    codes_o: NDArray[np.integer]
    codes_s: NDArray[np.integer]
    w_o: int
    w_s: int


class PreservationSums(NamedTuple):
    """Running sums of preservation items: ``(items, preservation, length, synthetic count,
    proportional error)`` per count bin (``by_bin``, bins ``bins``) and for one length."""

    bins: NDArray[np.float64]
    by_bin: NDArray[np.float64]
    by_len: NDArray[np.float64]


def compact_codes(codes: NDArray[np.int32]) -> NDArray[np.integer]:
    """Column-major copy ``(n_columns, n)`` of (n, n_columns) codes in the smallest int dtype."""
    top = int(codes.max(initial=0))
    dtype = np.int8 if top < 1 << 7 else np.int16 if top < 1 << 15 else np.int32
    out = np.empty((codes.shape[1], codes.shape[0]), dtype=dtype)
    if codes.size:
        _transpose_into(np.ascontiguousarray(codes), out)
    return out


def low_cardinality_group(radices: list[int], limit: int, min_size: int = 2) -> tuple[int, ...]:
    """Ascending indices of the lowest-radix columns whose joint table has <= ``limit`` cells.

    Any marginal inside the group follows from the group's joint table by summing it, and a
    record's combinations inside the group follow from its joint cell: one pass over the
    records serves all of them. Empty when fewer than ``min_size`` columns fit.
    """
    group: list[int] = []
    cells = 1
    for c in sorted(range(len(radices)), key=lambda c: (radices[c], c)):
        if cells * radices[c] > limit:
            break
        group.append(c)
        cells *= radices[c]
    return tuple(sorted(group)) if len(group) >= min_size else ()


def joint_groups(radices: list[int], limit: int) -> list[tuple[int, ...]]:
    """Column groups with small joint tables (<= ``limit`` cells), for one pass each.

    First the :func:`low_cardinality_group`, then each other column with as many of that
    group's columns as fit beside it (at least one).
    """
    base = low_cardinality_group(radices, limit)
    groups = [base] if base else []
    for h in sorted(set(range(len(radices))) - set(base), key=lambda c: (radices[c], c)):
        sub = low_cardinality_group([radices[c] for c in base], limit // radices[h], 1)
        if sub:
            groups.append(tuple(sorted((h, *(base[i] for i in sub)))))
    return groups


@_jit
def _transpose_into(codes, out):  # type: ignore[no-untyped-def]
    """``out[j, i] = codes[i, j]`` (one sequential read of the row-major table)."""
    for i in range(codes.shape[0]):
        for j in range(codes.shape[1]):
            out[j, i] = codes[i, j]


@_jit
def _block_keys(codes, key, shift, start, m, buf):  # type: ignore[no-untyped-def]
    """``buf[:m]`` = keys of records ``start .. start + m`` (1-d row slices: vectorized loops)."""
    cols, mult = key.cols, key.mult
    row, w = codes[cols[0], start : start + m], mult[0]
    for i in range(m):
        buf[i] = (np.int64(row[i]) + shift) * w
    for j in range(1, cols.shape[0]):
        row, w = codes[cols[j], start : start + m], mult[j]
        for i in range(m):
            buf[i] += (np.int64(row[i]) + shift) * w


@_jit
def count_dense(codes: np.ndarray, key: CliqueKey, acc: np.ndarray) -> None:
    """Add the count of every local key ``sum((code + 1) * mult)`` to ``acc`` (0 digits too)."""
    n, size = codes.shape[1], acc.shape[0]
    lanes = 4 if size < LANES_BELOW else 1
    local = np.zeros((lanes, size if lanes > 1 else 0), dtype=acc.dtype)
    buf = np.empty(BLOCK, dtype=np.int64)
    for start in range(0, n, BLOCK):
        m = min(BLOCK, n - start)
        _block_keys(codes, key, 1, start, m, buf)
        if lanes > 1:
            for i in range(m):
                local[i & 3, buf[i]] += 1
        else:
            for i in range(m):
                acc[buf[i]] += 1
    if lanes > 1:
        for cell in range(size):
            acc[cell] += local[0, cell] + local[1, cell] + local[2, cell] + local[3, cell]


@_jit
def local_keys_of(codes: np.ndarray, key: CliqueKey) -> np.ndarray:
    """Local key ``sum((code + 1) * mult)`` of every record (digit 0 = empty cell)."""
    out = np.empty(codes.shape[1], dtype=np.int64)
    for start in range(0, codes.shape[1], BLOCK):
        m = min(BLOCK, codes.shape[1] - start)
        _block_keys(codes, key, 1, start, m, out[start : start + m])
    return out


@_jit
def min_rank_dense(codes: np.ndarray, key: CliqueKey, table: np.ndarray, best: np.ndarray) -> None:
    """``best[i] = min(best[i], table[local key of record i])``."""
    n = codes.shape[1]
    buf = np.empty(BLOCK, dtype=np.int64)
    for start in range(0, n, BLOCK):
        m = min(BLOCK, n - start)
        _block_keys(codes, key, 1, start, m, buf)
        for i in range(m):
            r = table[buf[i]]
            if r < best[start + i]:
                best[start + i] = r


@_jit
def min_rank_sorted(
    codes: np.ndarray, key: CliqueKey, keys: np.ndarray, ranks: np.ndarray, best: np.ndarray
) -> None:
    """As :func:`min_rank_dense` with the table given as sorted unique ``keys`` and ``ranks``."""
    n, nk = codes.shape[1], keys.shape[0]
    buf = np.empty(BLOCK, dtype=np.int64)
    for start in range(0, n, BLOCK):
        m = min(BLOCK, n - start)
        _block_keys(codes, key, 1, start, m, buf)
        for i in range(m):
            k = buf[i]
            lo, hi = 0, nk
            while lo < hi:  # leftmost position with keys[pos] >= k
                mid = (lo + hi) >> 1
                if keys[mid] < k:
                    lo = mid + 1
                else:
                    hi = mid
            if lo < nk and keys[lo] == k and ranks[lo] < best[start + i]:
                best[start + i] = ranks[lo]


@_jit
def _add_counts(codes, key, weight, acc, lane_mask):  # type: ignore[no-untyped-def]
    """``acc[i & lane_mask, key_i] += weight`` for every record i (lanes avoid stalls)."""
    buf = np.empty(BLOCK, dtype=np.int64)
    n = codes.shape[1]
    for start in range(0, n, BLOCK):
        m = min(BLOCK, n - start)
        _block_keys(codes, key, 0, start, m, buf)
        for i in range(m):
            acc[i & lane_mask, buf[i]] += weight


@_jit
def _take_abs(codes, key, acc):  # type: ignore[no-untyped-def]
    """Sum of ``|acc[key]|`` over the records' keys, zeroing each cell after its first visit."""
    buf = np.empty(BLOCK, dtype=np.int64)
    total = 0
    n = codes.shape[1]
    for start in range(0, n, BLOCK):
        m = min(BLOCK, n - start)
        _block_keys(codes, key, 0, start, m, buf)
        for i in range(m):
            total += abs(acc[0, buf[i]])
            acc[0, buf[i]] = 0
    return total


@_jit
def abs_difference(tables: ComparedTables, key: CliqueKey, acc: np.ndarray, cells: int) -> int:
    """``sum over cells |w_o * count_o - w_s * count_s|`` of the marginal on ``key.cols``.

    Keys are ``sum(code * mult)`` (codes >= 0, keys < ``cells``). ``acc`` is an all-zero int64
    buffer of shape (1, >= ``cells``) and is all zero again on return.
    """
    codes_o, codes_s = tables.codes_o, tables.codes_s
    if cells < LANES_BELOW:  # small marginal: 4 interleaved counters per cell
        lanes = np.zeros((4, cells), dtype=np.int64)
        _add_counts(codes_o, key, tables.w_o, lanes, 3)
        _add_counts(codes_s, key, -tables.w_s, lanes, 3)
        total = 0
        for cell in range(cells):
            total += abs(lanes[0, cell] + lanes[1, cell] + lanes[2, cell] + lanes[3, cell])
        return total
    _add_counts(codes_o, key, tables.w_o, acc, 0)
    _add_counts(codes_s, key, -tables.w_s, acc, 0)
    if cells > codes_o.shape[1] + codes_s.shape[1]:  # few occupied cells: visit them again
        visited: int = _take_abs(codes_o, key, acc) + _take_abs(codes_s, key, acc)
        return visited
    total = 0
    for cell in range(cells):
        total += abs(acc[0, cell])
        acc[0, cell] = 0
    return total


@_jit
def add_preservation_items(
    sen: np.ndarray,
    syn: np.ndarray,
    length: int,
    resolution: int,
    sensitive_part: bool,
    sums: PreservationSums,
) -> None:
    """Add preservation items (combinations of ``length``) to the running sums, in order.

    Items are the rows with ``sen >= resolution`` (``sensitive_part``) or ``sen < resolution``.
    Each adds ``(1, preservation, length, syn, proportional error)`` to ``sums.by_len`` and to
    the row of ``sums.by_bin`` of the first bin >= syn (the last bin at most).
    """
    bins, by_bin, by_len = sums.bins, sums.by_bin, sums.by_len
    last = bins.shape[0] - 1
    lf = np.float64(length)
    for i in range(sen.shape[0]):
        if (sen[i] >= resolution) != sensitive_part:
            continue
        s, y = np.float64(sen[i]), np.float64(syn[i])
        pres, perr = 0.0, 1.0
        if s > 0:
            pres, perr = min(y / s, 1.0), abs(y - s) / s
        b = 0
        while b < last and bins[b] < y:
            b += 1
        for row in (by_bin[b], by_len):
            row[0] += 1.0
            row[1] += pres
            row[2] += lf
            row[3] += y
            row[4] += perr


@_jit
def signed_counts(tables: ComparedTables, key: CliqueKey, cells: int) -> np.ndarray:
    """Per cell ``w_o * count_o - w_s * count_s`` of the marginal on ``key.cols`` (keys as
    above)."""
    acc = np.zeros((1, cells), dtype=np.int64)
    _add_counts(tables.codes_o, key, tables.w_o, acc, 0)
    _add_counts(tables.codes_s, key, -tables.w_s, acc, 0)
    row: np.ndarray = acc[0]
    return row
