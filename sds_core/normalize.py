"""Finalisation of DP aggregates (§1.8): rounding, zero removal, missing parents, child ≤ parent.

Everything here is post-processing of noisy counts, so it costs no privacy. It runs once after
the last length of :mod:`sds_core.dp_aggregate`; all steps are vectorized over combinations
with int64 mixed-radix keys and binary search.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np
from numpy.typing import NDArray

from sds_core.aggregates import CombinationCounts, decode_keys, encode_keys
from sds_core.errors import invariant


def round_half_away_from_zero(x: NDArray[np.floating]) -> NDArray[np.int64]:
    """Round to the nearest integer, halves away from zero (not Python's banker's rounding).

    >>> round_half_away_from_zero(np.array([0.5, 1.5, 2.5, -0.5, 0.49])).tolist()
    [1, 2, 3, -1, 0]
    """
    x = np.asarray(x, dtype=np.float64)
    return (np.sign(x) * np.floor(np.abs(x) + 0.5)).astype(np.int64)


def _lookup(
    cc: CombinationCounts, keys: NDArray[np.int64], base: int
) -> tuple[NDArray[np.bool_], NDArray[np.int64]]:
    """(present mask, index into cc) of each key among cc's rows."""
    if len(cc) == 0:
        return np.zeros(keys.shape[0], dtype=bool), np.zeros(keys.shape[0], dtype=np.int64)
    hay = encode_keys(cc.attrs, base)
    pos = np.minimum(np.searchsorted(hay, keys), hay.shape[0] - 1)
    return hay[pos] == keys, pos


def remove_non_positive(by_len: Mapping[int, CombinationCounts]) -> dict[int, CombinationCounts]:
    """Drop combinations whose count is <= 0 (after rounding)."""
    out = {}
    for k, cc in by_len.items():
        keep = cc.counts > 0
        out[k] = CombinationCounts(cc.attrs[keep], cc.counts[keep])
    return out


def add_missing_parents(
    by_len: Mapping[int, CombinationCounts], base: int
) -> dict[int, CombinationCounts]:
    """Insert absent sub-combinations of lengths 2..|c|−1 with the max count of their children.

    Computed against the map before any insertion (spec §1.8 step 3); 1-tuples are never added.
    """
    found: dict[int, list[tuple[NDArray[np.int64], NDArray[np.int64]]]] = {}
    for big, cc in by_len.items():
        if len(cc) == 0:
            continue
        for sub_len in range(2, big):
            target = by_len.get(sub_len, CombinationCounts.empty(sub_len))
            for pos in itertools.combinations(range(big), sub_len):
                keys = encode_keys(cc.attrs[:, list(pos)], base)
                present, _ = _lookup(target, keys, base)
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
    for big, cc in by_len.items():
        new = cc.counts.copy()
        for sub_len in range(1, big):
            target = by_len.get(sub_len, CombinationCounts.empty(sub_len))
            if len(cc) == 0:
                continue
            for pos in itertools.combinations(range(big), sub_len):
                keys = encode_keys(cc.attrs[:, list(pos)], base)
                present, idx = _lookup(target, keys, base)
                if stop_if_parent_missing and sub_len >= 2 and not present.all():
                    return None
                np.minimum(new, np.where(present, target.counts[idx], new), out=new)
        out[big] = CombinationCounts(cc.attrs, new)
    return out


def finalize_counts(
    by_len: Mapping[int, CombinationCounts], base: int
) -> dict[int, CombinationCounts]:
    """Zero removal, missing parents and normalisation of integer noisy counts (§1.8 steps 2-4).

    Survivors of :mod:`sds_core.dp_aggregate` are downward closed, so usually no parent is
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
