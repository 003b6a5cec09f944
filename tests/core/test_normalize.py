"""Tests of sds_core.marginals.normalization: rounding, missing parents and child <= parent
normalisation."""

from __future__ import annotations

import itertools

import numpy as np

from sds_core.marginals.aggregates import CombinationCounts, encode_keys
from sds_core.marginals.normalization import (
    add_missing_parents,
    finalize_counts,
    normalize_children,
    round_half_away_from_zero,
)

BASE = 10


def _cc(rows: list[tuple[int, ...]], counts: list[int]) -> CombinationCounts:
    k = len(rows[0])
    return CombinationCounts.from_unsorted(
        np.array(rows, dtype=np.int32).reshape(-1, k), np.array(counts, dtype=np.int64)
    )


def _as_dict(by_len: dict[int, CombinationCounts]) -> dict[tuple[int, ...], int]:
    return {
        tuple(r): int(c)
        for cc in by_len.values()
        for r, c in zip(cc.attrs.tolist(), cc.counts.tolist(), strict=True)
    }


def test_round_half_away_from_zero() -> None:
    """Halves go away from zero (Python's round would give 0, 2, 2)."""
    assert round_half_away_from_zero(np.array([0.5, 1.5, 2.5, -2.5, 2.4999])).tolist() == [
        1,
        2,
        3,
        -3,
        2,
    ]


def test_missing_parents_get_max_child_count() -> None:
    """An absent 2-sub-combination is inserted with the max count of its children."""
    by_len = {
        1: _cc([(0,), (3,), (6,), (8,)], [50, 40, 30, 20]),
        2: _cc([(0, 3), (0, 6), (3, 6)], [10, 9, 8]),  # (0, 8), (3, 8), (6, 8) missing
        3: _cc([(0, 3, 6), (0, 3, 8), (0, 6, 8)], [5, 7, 4]),
    }
    out = _as_dict(add_missing_parents(by_len, BASE))
    assert out[(0, 8)] == 7  # children (0,3,8)=7 and (0,6,8)=4
    assert out[(3, 8)] == 7
    assert out[(6, 8)] == 4
    assert out[(0, 3)] == 10  # present ones untouched
    assert len(out) == 4 + 6 + 3


def test_normalize_uses_min_over_all_present_parents() -> None:
    """Child count becomes the min over every present proper sub-combination (pre-pass counts)."""
    by_len = {
        1: _cc([(0,), (3,), (6,)], [100, 4, 100]),
        2: _cc([(0, 3), (0, 6), (3, 6)], [10, 2, 8]),
        3: _cc([(0, 3, 6)], [9]),
    }
    out = _as_dict(normalize_children(by_len, BASE))
    assert out[(0, 3)] == 4  # single (3,) = 4
    assert out[(0, 3, 6)] == 2  # pair (0, 6) = 2
    assert out[(3, 6)] == 4
    assert out[(0,)] == 100


def test_finalize_random_maps_have_no_violations() -> None:
    """Random survivor maps: after finalize no child exceeds a parent, no parent is missing."""
    rng = np.random.default_rng(1)
    attrs_by_col = [list(range(c * 3, c * 3 + 3)) for c in range(4)]  # 4 columns x 3 values
    for _ in range(20):
        by_len = {}
        for k in (1, 2, 3):
            rows = [
                tuple(sorted(vals))
                for cols in itertools.combinations(range(4), k)
                for vals in itertools.product(*(attrs_by_col[c] for c in cols))
            ]
            keep = [r for r in rows if rng.random() < (0.9 if k == 1 else 0.5)]
            by_len[k] = _cc(keep, rng.integers(-3, 60, len(keep)).tolist())
        out = finalize_counts(by_len, 12)
        flat = _as_dict(out)
        assert all(c > 0 for c in flat.values())
        for combo, c in flat.items():
            for sub_len in range(1, len(combo)):
                for sub in itertools.combinations(combo, sub_len):
                    if sub_len >= 2:
                        assert sub in flat, f"missing parent {sub} of {combo}"
                    if sub in flat:
                        assert c <= flat[sub]
        for k, cc in out.items():
            keys = encode_keys(cc.attrs, 12)
            assert (np.diff(keys) > 0).all(), f"length {k} rows not sorted/unique"


def test_dense_and_binary_search_parent_index_agree(monkeypatch) -> None:
    """finalize_counts is the same compiled or not, with dense key tables or binary search."""
    from sds_core.marginals import normalization as normalize

    rng = np.random.default_rng(4)
    attrs_by_col = [list(range(c * 3, c * 3 + 3)) for c in range(5)]
    for _ in range(5):
        by_len = {}
        for k in (1, 2, 3, 4):
            rows = [
                tuple(sorted(vals))
                for cols in itertools.combinations(range(5), k)
                for vals in itertools.product(*(attrs_by_col[c] for c in cols))
            ]
            keep = [r for r in rows if rng.random() < (0.9 if k == 1 else 0.4)]
            by_len[k] = _cc(keep, rng.integers(-3, 60, len(keep)).tolist())
        variants = []
        for compiled, limit in itertools.product((True, False), (1 << 22, 0)):
            monkeypatch.setattr(normalize, "HAVE_NUMBA", compiled)
            monkeypatch.setattr(normalize, "DENSE_INDEX_LIMIT", limit)
            variants.append(finalize_counts(by_len, 15))
            monkeypatch.undo()
        ref = variants[-1]  # numpy, binary search
        assert sorted(ref) == [1, 2, 3, 4]
        for got in variants[:-1]:
            assert sorted(got) == sorted(ref)
            for k in ref:
                assert np.array_equal(got[k].attrs, ref[k].attrs)
                assert np.array_equal(got[k].counts, ref[k].counts)
