"""Per-record contributions to the DP candidates: counting and contribution bounding.

Used by :func:`sds_core.marginals.engine.aggregate_length` (spec §1.5 steps 2-4): a map-reduce
over record partitions gives every candidate's count and every record's number of valid
tuples |W_{j,k}|; records above the allowed sensitivity Δ_k then keep a uniform random subset.
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
    if HAVE_NUMBA:
        local, valid = _count_compiled(codes, lookups, chunk)
    else:
        local, valid = _count_numpy(codes, lookups, chunk)
    counts = np.zeros(n_cands, dtype=np.int64)
    for acc, lk in zip(local, lookups, strict=True):
        counts[lk.rows] = acc
    return counts, valid


def _count_numpy(
    codes: NDArray[np.int32], lookups: list[CliqueLookup], chunk: int
) -> tuple[list[NDArray[np.int64]], NDArray[np.int32]]:
    """Per-clique local counts and |W_{j,k}| with numpy (fallback without numba)."""
    n = codes.shape[0]
    local = [np.zeros(lk.rows.shape[0], dtype=np.int64) for lk in lookups]
    valid = np.zeros(n, dtype=np.int32)
    for start in range(0, n, chunk):
        part = shifted_columns(codes[start : start + chunk])
        w = valid[start : start + chunk]
        for acc, lk in zip(local, lookups, strict=True):
            idx = lk.lookup(part)
            hit = idx >= 0
            w += hit
            acc += np.bincount(idx[hit], minlength=acc.shape[0])
    return local, valid


def _count_compiled(
    codes: NDArray[np.int32], lookups: list[CliqueLookup], chunk: int
) -> tuple[list[NDArray[np.int64]], NDArray[np.int32]]:
    """As :func:`_count_numpy` with the compiled kernels, clique by clique per partition.

    Each partition is first reduced to its distinct records with multiplicities (categorical
    data repeats rows a lot); the counts are the same integers, the work is per distinct row.
    """
    n = codes.shape[0]
    acc1 = [np.zeros(lk.rows.shape[0] + 1, dtype=np.int64) for lk in lookups]  # [0]: misses
    keys = [CliqueKey(np.asarray(lk.cols, dtype=np.int64), lk.mult) for lk in lookups]
    index = [None if lk.table is not None else key_buckets(lk.keys) for lk in lookups]
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
    return [a[1:] for a in acc1], valid


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


def bound_contributions(
    counts: NDArray[np.int64],
    codes: NDArray[np.int32],
    lookups: list[CliqueLookup],
    allowed: int,
    rng: np.random.Generator,
    chunk: int,
) -> NDArray[np.int64]:
    """Replace the contributions of the given (over-limit) records by a uniform random subset
    of size ``allowed`` of each record's valid tuples (without replacement, §1.5 step 4).

    Priorities are drawn in canonical (record, candidate) order, so the result does not
    depend on the partition size.
    """
    out = counts.copy()
    for start in range(0, codes.shape[0], chunk):
        rec, cand = _record_pairs(codes[start : start + chunk], lookups)
        n_rec: int = rec.shape[0]
        prio = rng.random(n_rec)
        order = np.lexsort((prio, rec))
        rec_s = rec[order]
        first = np.searchsorted(rec_s, rec_s, side="left")
        keep = order[(np.arange(rec_s.shape[0]) - first) < allowed]
        dropped = np.ones(cand.shape[0], dtype=bool)
        dropped[keep] = False
        ids, times = np.unique(cand[dropped], return_counts=True)
        out[ids] -= times
    return out
