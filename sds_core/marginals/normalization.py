"""Finalisation of DP aggregates (§1.8): rounding, zero removal, missing parents, child ≤ parent.

Everything here is post-processing of noisy counts, so it costs no privacy. It runs once after
the last length of :mod:`sds_core.marginals.engine`; all steps work on int64 mixed-radix keys
found by dense tables or binary search (the child ≤ parent pass is compiled when numba is there).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sds_core._jit import HAVE_NUMBA, _jit
from sds_core.errors import invariant
from sds_core.marginals.aggregates import CombinationCounts, decode_keys, encode_keys


def round_half_away_from_zero(x: NDArray[np.number[Any]]) -> NDArray[np.int64]:
    """Round to the nearest integer, halves away from zero (not Python's banker's rounding).

    >>> round_half_away_from_zero(np.array([0.5, 1.5, 2.5, -0.5, 0.49])).tolist()
    [1, 2, 3, -1, 0]
    """
    x = np.asarray(x, dtype=np.float64)
    rounded: NDArray[np.int64] = (np.sign(x) * np.floor(np.abs(x) + 0.5)).astype(np.int64)
    return rounded


DENSE_INDEX_LIMIT = 1 << 22
"""Largest key range (base ** length) for which a target length gets a dense key → row table."""


class _Index:
    """Row of each key among one length's combinations: a dense table when the key range is
    small (one random access per key), else binary search in the sorted keys."""

    def __init__(self, cc: CombinationCounts, base: int) -> None:
        self.n = len(cc)
        self.dense: NDArray[np.int32] | None = None
        self.hay = encode_keys(cc.attrs, base) if self.n else np.zeros(0, dtype=np.int64)
        if self.n and base**cc.length <= DENSE_INDEX_LIMIT:
            self.dense = np.full(base**cc.length, -1, dtype=np.int32)
            self.dense[self.hay] = np.arange(self.n, dtype=np.int32)

    def find(self, keys: NDArray[np.int64]) -> tuple[NDArray[np.bool_], NDArray[np.int64]]:
        """(present mask, row) of each key; the row of an absent key is some valid row."""
        if self.n == 0:
            return np.zeros(keys.shape[0], dtype=bool), np.zeros(keys.shape[0], dtype=np.int64)
        if self.dense is not None:
            row = self.dense[keys]
            present = row >= 0
            return present, np.maximum(row, 0).astype(np.int64)
        pos = np.minimum(np.searchsorted(self.hay, keys), self.n - 1)
        return self.hay[pos] == keys, pos


def _sub_keys(attrs: NDArray[np.int32], pos: tuple[int, ...], base: int) -> NDArray[np.int64]:
    """:func:`encode_keys` of the columns ``pos`` of ``attrs`` without copying them out."""
    keys = attrs[:, pos[0]].astype(np.int64)
    for p in pos[1:]:
        keys *= base
        keys += attrs[:, p]
    return keys


@_jit
def min_over_subsets(
    attrs: np.ndarray,
    new: np.ndarray,
    positions: np.ndarray,
    base: np.int64,
    dense: np.ndarray,
    hay: np.ndarray,
    target_counts: np.ndarray,
    stop_if_missing: bool,
) -> bool:
    """new[r] = min(new[r], count of every present sub-combination attrs[r, positions[s]]).

    Sub-combinations are found by their key in ``dense`` (key → row, -1 absent) when it is
    non-empty, else by binary search in the sorted keys ``hay``. With ``stop_if_missing`` it
    returns False at the first absent one (``new`` is then partly updated); else True.
    """
    n_hay = hay.shape[0]
    use_dense = dense.shape[0] > 0
    for r in range(attrs.shape[0]):
        for t in range(positions.shape[0]):
            key = np.int64(0)
            for q in range(positions.shape[1]):
                key = key * base + np.int64(attrs[r, positions[t, q]])
            row = np.int64(-1)
            if use_dense:
                row = np.int64(dense[key])
            elif n_hay > 0:
                lo = np.searchsorted(hay, key)
                if lo < n_hay and hay[lo] == key:
                    row = lo
            if row < 0:
                if stop_if_missing:
                    return False
                continue
            if target_counts[row] < new[r]:
                new[r] = target_counts[row]
    return True


def remove_non_positive(by_len: Mapping[int, CombinationCounts]) -> dict[int, CombinationCounts]:
    """Drop combinations whose count is <= 0 (after rounding)."""
    out = {}
    for k, cc in by_len.items():
        keep = cc.counts > 0
        out[k] = cc if keep.all() else CombinationCounts(cc.attrs[keep], cc.counts[keep])
    return out


def add_missing_parents(
    by_len: Mapping[int, CombinationCounts], base: int
) -> dict[int, CombinationCounts]:
    """Insert absent sub-combinations of lengths 2..|c|−1 with the max count of their children.

    Computed against the map before any insertion (spec §1.8 step 3); 1-tuples are never added.
    """
    found: dict[int, list[tuple[NDArray[np.int64], NDArray[np.int64]]]] = {}
    index: dict[int, _Index] = {}
    for big, cc in by_len.items():
        if len(cc) == 0:
            continue
        for sub_len in range(2, big):
            if sub_len not in index:
                index[sub_len] = _Index(by_len.get(sub_len, CombinationCounts.empty(sub_len)), base)
            for pos in itertools.combinations(range(big), sub_len):
                keys = _sub_keys(cc.attrs, pos, base)
                present, _ = index[sub_len].find(keys)
                if not present.all():
                    found.setdefault(sub_len, []).append((keys[~present], cc.counts[~present]))
    out = dict(by_len)
    for sub_len, parts in found.items():
        keys = np.concatenate([p[0] for p in parts])
        counts = np.concatenate([p[1] for p in parts])
        order = np.lexsort((counts, keys))
        keys, counts = keys[order], counts[order]
        last = np.flatnonzero(np.concatenate((keys[1:] != keys[:-1], [True])))
        new_keys, new_counts = keys[last], counts[last]  # max count per key (sorted last)
        old = out.get(sub_len, CombinationCounts.empty(sub_len))
        out[sub_len] = CombinationCounts.from_unsorted(
            np.concatenate([old.attrs, decode_keys(new_keys, base, sub_len)]),
            np.concatenate([old.counts, new_counts]),
        )
    return out


def normalize_children(
    by_len: Mapping[int, CombinationCounts], base: int, *, stop_if_parent_missing: bool = False
) -> dict[int, CombinationCounts] | None:
    """count'(c) = min(count(c), count(s) for every present proper sub-combination s of c).

    All minima use the counts before this pass (spec §1.8 step 4); since every proper
    sub-combination of every length is considered, one pass gives child ≤ parent everywhere.
    With ``stop_if_parent_missing`` it returns None as soon as a sub-combination of length
    >= 2 is absent (the caller then adds missing parents first).
    """
    out = {}
    index: dict[int, _Index] = {}
    for big, cc in by_len.items():
        new = cc.counts.copy()
        for sub_len in range(1, big):
            target = by_len.get(sub_len, CombinationCounts.empty(sub_len))
            if len(cc) == 0:
                continue
            if sub_len not in index:
                index[sub_len] = _Index(target, base)
            if HAVE_NUMBA:
                ix = index[sub_len]
                positions = np.array(list(itertools.combinations(range(big), sub_len)))
                empty = np.zeros(0, dtype=np.int32)
                dense = ix.dense if ix.dense is not None else empty
                stop = stop_if_parent_missing and sub_len >= 2
                if not min_over_subsets(
                    cc.attrs, new, positions, base, dense, ix.hay, target.counts, stop
                ):
                    return None
                continue
            for pos in itertools.combinations(range(big), sub_len):
                present, idx = index[sub_len].find(_sub_keys(cc.attrs, pos, base))
                if stop_if_parent_missing and sub_len >= 2 and not present.all():
                    return None
                np.minimum(new, np.where(present, target.counts[idx], new), out=new)
        out[big] = CombinationCounts(cc.attrs, new)
    return out


def finalize_counts(
    by_len: Mapping[int, CombinationCounts], base: int
) -> dict[int, CombinationCounts]:
    """Zero removal, missing parents and normalisation of integer noisy counts (§1.8 steps 2-4).

    Survivors of :mod:`sds_core.marginals.engine` are downward closed, so usually no parent is
    missing: normalisation is tried first and the parent pass runs only when needed.
    """
    for cc in by_len.values():
        invariant(cc.counts.dtype.kind == "i", "finalize_counts expects integer counts")
    positive = remove_non_positive(by_len)
    done = normalize_children(positive, base, stop_if_parent_missing=True)
    if done is not None:
        return done
    result = normalize_children(add_missing_parents(positive, base), base)
    invariant(result is not None, "normalisation without the stop flag always returns")
    return result  # type: ignore[return-value]
