"""Per-record contributions to the DP candidates: counting and contribution bounding.

Used by :func:`sds_core.marginals.engine.aggregate_length` (spec §1.5 steps 2-4): a map-reduce
over record partitions gives every candidate's count and every record's number of valid
tuples |W_{j,k}|; records above the allowed sensitivity Δ_k then keep a uniform random subset,
drawn per record from its global row number (identical at any partitioning).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from sds_core.marginals._kernels import (
    HAVE_NUMBA,
    CliqueKey,
    DistinctRows,
    count_clique_dense,
    count_clique_sorted,
    distinct_rows,
    key_buckets,
)
from sds_core.marginals.combinations import CliqueLookup, shifted_columns


def candidate_counts(
    codes: NDArray[np.int32], lookups: list[CliqueLookup], n_cands: int, chunk: int
) -> tuple[NDArray[np.int64], NDArray[np.int32]]:
    """Map-reduce over partitions: unbounded candidate counts and |W_{j,k}| per record.

    Args:
        codes: the records' codes (n, n_columns).
        lookups: :func:`sds_core.marginals.combinations.build_lookups` of the candidates V_k.
        n_cands: |V_k|.
        chunk: records per partition (memory bound only; the result does not depend on it).

    Returns:
        (count of every candidate, number of valid tuples of every record).
    """
    counts, [valid] = candidate_counts_many([codes], lookups, n_cands, chunk)
    return counts, valid


def candidate_counts_many(
    codes_list: list[NDArray[np.int32]], lookups: list[CliqueLookup], n_cands: int, chunk: int
) -> tuple[NDArray[np.int64], list[NDArray[np.int32]]]:
    """:func:`candidate_counts` of several record sets (one worker's partitions) summed into one
    count vector, and |W_{j,k}| of each set. One set of per-clique counters (and sorted-key
    indexes) serves every set: the per-candidate work is paid once, not once per set."""
    count = _count_compiled if HAVE_NUMBA else _count_numpy
    local, valids = count(codes_list, lookups, chunk)
    counts = np.zeros(n_cands, dtype=np.int64)
    for acc, lk in zip(local, lookups, strict=True):
        counts[lk.rows] = acc
    return counts, valids


def _count_numpy(
    codes_list: list[NDArray[np.int32]], lookups: list[CliqueLookup], chunk: int
) -> tuple[list[NDArray[np.int64]], list[NDArray[np.int32]]]:
    """Per-clique local counts and |W_{j,k}| with numpy (fallback without numba)."""
    local = [np.zeros(lk.rows.shape[0], dtype=np.int64) for lk in lookups]
    valids = []
    for codes in codes_list:
        n = codes.shape[0]
        valid = np.zeros(n, dtype=np.int32)
        for start in range(0, n, chunk):
            part = shifted_columns(codes[start : start + chunk])
            w = valid[start : start + chunk]
            for acc, lk in zip(local, lookups, strict=True):
                idx = lk.lookup(part)
                hit = idx >= 0
                w += hit
                acc += np.bincount(idx[hit], minlength=acc.shape[0])
        valids.append(valid)
    return local, valids


def _count_compiled(
    codes_list: list[NDArray[np.int32]], lookups: list[CliqueLookup], chunk: int
) -> tuple[list[NDArray[np.int64]], list[NDArray[np.int32]]]:
    """As :func:`_count_numpy` with the compiled kernels, clique by clique per chunk.

    Each chunk is first reduced to its distinct records with multiplicities (categorical
    data repeats rows a lot); the counts are the same integers, the work is per distinct row.
    """
    acc1 = [np.zeros(lk.rows.shape[0] + 1, dtype=np.int64) for lk in lookups]  # [0]: misses
    keys = [CliqueKey(np.asarray(lk.cols, dtype=np.int64), lk.mult) for lk in lookups]
    index = [None if lk.table is not None else key_buckets(lk.keys) for lk in lookups]
    valids = []
    for codes in codes_list:
        n = codes.shape[0]
        row_mult = _row_multipliers(codes)
        valid = np.zeros(n, dtype=np.int32)
        for start in range(0, n, chunk):
            part = codes[start : start + chunk]
            if row_mult is None:
                first, weight, inverse = None, np.ones(part.shape[0], dtype=np.int64), None
            else:
                first, weight, inverse = distinct_rows(part, row_mult)
                part = part[first]
            rows = DistinctRows(np.ascontiguousarray(part.T, dtype=np.int32), weight)
            w = np.zeros(part.shape[0], dtype=np.int32)
            for acc, key, ix, lk in zip(acc1, keys, index, lookups, strict=True):
                if ix is None:
                    count_clique_dense(rows, key, lk.table, acc, w)
                else:
                    count_clique_sorted(rows, key, ix, acc, w)
            valid[start : start + chunk] = w if inverse is None else w[inverse]
        valids.append(valid)
    return [a[1:] for a in acc1], valids


def _row_multipliers(codes: NDArray[np.int32]) -> NDArray[np.int64] | None:
    """Mixed-radix multipliers making Σ (code + 1)·mult an injective int64 row key, or None
    when the key range does not fit (then records are counted one by one)."""
    if codes.shape[0] == 0 or codes.shape[1] == 0:
        return None
    radix = [int(m) + 2 for m in codes.max(axis=0).tolist()]  # digits 0..max + 1
    mult, size = [], 1
    for r in reversed(radix):
        mult.append(size)
        size *= r
    if size >= 1 << 62:
        return None
    return np.array(mult[::-1], dtype=np.int64)


def _record_pairs(
    codes: NDArray[np.int32], lookups: list[CliqueLookup]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(record, candidate) of every valid tuple of these records, sorted by record, candidate."""
    recs, cands = [], []
    shifted = shifted_columns(codes)
    for lk in lookups:
        idx = lk.lookup(shifted)
        hit = np.flatnonzero(idx >= 0)
        recs.append(hit)
        cands.append(lk.rows[idx[hit]])
    rec = np.concatenate(recs) if recs else np.zeros(0, dtype=np.int64)
    cand = np.concatenate(cands) if cands else np.zeros(0, dtype=np.int64)
    order = np.lexsort((cand, rec))
    return rec[order], cand[order]


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _mix64(z: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """SplitMix64's finalizer: a bijection of uint64 whose outputs look independent."""
    z = z ^ (z >> np.uint64(30))
    z = z * _MIX1
    z = z ^ (z >> np.uint64(27))
    z = z * _MIX2
    out: NDArray[np.uint64] = z ^ (z >> np.uint64(31))
    return out


def record_priorities(
    key: int, rows: NDArray[np.integer], candidates: NDArray[np.integer]
) -> NDArray[np.uint64]:
    """Random priority of each (record, candidate) pair, keyed by the record's global row number.

    A pure function of (``key``, row, candidate): the same record draws the same priorities in
    any partition, batch or worker, which is what makes contribution bounding identical at any
    partitioning. ``key`` comes from :meth:`ReleaseRandomness.record_key` (per release and length).

    >>> p = record_priorities(7, np.array([0, 0, 5]), np.array([1, 2, 1]))
    >>> bool(p[2] == record_priorities(7, np.array([5]), np.array([1]))[0])
    True
    """
    with np.errstate(over="ignore"):
        r = np.asarray(rows).astype(np.uint64) * _GOLDEN ^ np.uint64(key)
        c = np.asarray(candidates).astype(np.uint64) * _GOLDEN
        return _mix64(_mix64(r) + c)


def dropped_contributions(
    codes: NDArray[np.int32],
    valid: NDArray[np.int32],
    lookups: list[CliqueLookup],
    n_cands: int,
    allowed: int,
    *,
    record_key: int,
    first_row: int = 0,
    chunk: int,
) -> NDArray[np.int64]:
    """How much each candidate's count drops when every record with more than ``allowed`` valid
    tuples keeps a uniform random subset of ``allowed`` of them (without replacement, §1.5
    step 4); subtract it from the unbounded counts.

    Args:
        codes: the records' codes (a whole table or one partition of it).
        valid: |W_{j,k}| of those records (:func:`candidate_counts`).
        lookups, n_cands: as for :func:`candidate_counts`.
        allowed: Δ_k.
        record_key: :meth:`ReleaseRandomness.record_key` of this length.
        first_row: the global row number of ``codes[0]`` (a partition's offset in the table).
        chunk: records per batch (memory bound only).

    A record keeps the ``allowed`` tuples of smallest :func:`record_priorities`, which depend on
    its global row number, never on its position in a partition: any partitioning gives the
    same result.
    """
    out = np.zeros(n_cands, dtype=np.int64)
    over = np.flatnonzero(valid > allowed)
    for start in range(0, over.shape[0], chunk):
        rows = over[start : start + chunk]
        rec, cand = _record_pairs(codes[rows], lookups)
        prio = record_priorities(record_key, rows[rec] + first_row, cand)
        order = np.lexsort((prio, rec))
        rec_s = rec[order]
        first = np.searchsorted(rec_s, rec_s, side="left")
        keep = order[(np.arange(rec_s.shape[0]) - first) < allowed]
        dropped = np.ones(cand.shape[0], dtype=bool)
        dropped[keep] = False
        ids, times = np.unique(cand[dropped], return_counts=True)
        out[ids] += times
    return out
