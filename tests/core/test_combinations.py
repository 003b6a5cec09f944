"""Tests of sds_core.marginals.combinations: candidate generation (reference fixture) and clique
lookups."""

from __future__ import annotations

import itertools

import numpy as np
from table_fixtures import table_from_csv, table_from_rows

from sds_core.marginals.aggregates import AggregateSet, CombinationCounts
from sds_core.marginals.combinations import (
    build_lookups,
    candidates_from_survivors,
    contains,
    occurring_attributes,
    shifted_columns,
)


def _texts(agg_domain, attrs: np.ndarray) -> set[str]:
    a = AggregateSet(agg_domain, attrs.shape[1], {})
    return {a.combination_text(row) for row in attrs}


def test_reference_candidate_generation(shared_data) -> None:
    """test_noise_aggregator.csv: V1 = 7, V2 = 18, V3 = 20, and 14 after removing 2 pairs."""
    table = table_from_csv(shared_data / "sds-fixtures" / "test_noise_aggregator.csv")
    dom = table.domain
    v1 = occurring_attributes(dom, table.codes)
    assert v1.shape == (7, 1)
    s1 = CombinationCounts(v1, np.ones(7, dtype=np.int64))
    v2 = candidates_from_survivors(s1, dom)
    assert v2.shape == (18, 2)
    v3 = candidates_from_survivors(CombinationCounts(v2, np.ones(18, dtype=np.int64)), dom)
    assert v3.shape == (20, 3)
    keep = [
        t not in ("A:a1;B:b1", "A:a2;D:d1")
        for t in (_texts(dom, v2[i : i + 1]).pop() for i in range(18))
    ]
    s2 = CombinationCounts(v2[np.array(keep)], np.ones(16, dtype=np.int64))
    v3b = candidates_from_survivors(s2, dom)
    assert v3b.shape == (14, 3)
    texts = _texts(dom, v3b)
    assert "A:a1;B:b1;C:c1" not in texts and "A:a2;C:c1;D:d1" not in texts
    assert "A:a1;B:b2;C:c1" in texts


def test_candidates_equal_brute_force_definition() -> None:
    """Random survivors: the join equals 'every (k-1)-subset survived', sorted and unique."""
    rng = np.random.default_rng(11)
    header = ["A", "B", "C", "D", "E"]
    rows = [[f"{h}{rng.integers(1, 4)}" for h in header] for _ in range(50)]
    dom = table_from_rows(header, rows).domain
    attr_col = dom.attribute_columns()
    ids = range(dom.n_attributes)
    s2 = [c for c in itertools.combinations(ids, 2) if attr_col[c[0]] != attr_col[c[1]]]
    s2 = [c for c in s2 if rng.random() < 0.7]
    v3 = candidates_from_survivors(
        CombinationCounts(np.array(s2, dtype=np.int32), np.ones(len(s2), dtype=np.int64)), dom
    )
    s2set = set(s2)
    expected = sorted(
        c
        for c in itertools.combinations(ids, 3)
        if len({attr_col[a] for a in c}) == 3
        and all(sub in s2set for sub in itertools.combinations(c, 2))
    )
    assert [tuple(r) for r in v3.tolist()] == expected
    s3 = [c for c in expected if rng.random() < 0.8]
    v4 = candidates_from_survivors(
        CombinationCounts(np.array(s3, dtype=np.int32), np.ones(len(s3), dtype=np.int64)), dom
    )
    s3set = set(s3)
    expected4 = sorted(
        c
        for c in itertools.combinations(ids, 4)
        if len({attr_col[a] for a in c}) == 4
        and all(sub in s3set for sub in itertools.combinations(c, 3))
    )
    assert [tuple(r) for r in v4.tolist()] == expected4


def test_lookups_dense_and_sparse_agree() -> None:
    """Records map to the same candidates through dense tables and binary search."""
    rng = np.random.default_rng(5)
    header = ["A", "B", "C"]
    rows = [
        [("" if rng.random() < 0.1 else f"{h}{rng.integers(1, 5)}") for h in header]
        for _ in range(100)
    ]
    table = table_from_rows(header, rows)
    dom = table.domain
    cands = np.array(
        [
            c
            for c in itertools.combinations(range(dom.n_attributes), 2)
            if dom.attribute_columns()[c[0]] != dom.attribute_columns()[c[1]] and rng.random() < 0.5
        ],
        dtype=np.int32,
    )
    dense = build_lookups(dom, cands)
    sparse = build_lookups(dom, cands, dense_budget=0)
    assert all(lk.table is not None for lk in dense) and all(lk.table is None for lk in sparse)
    per_record = [set() for _ in range(100)]
    shifted = shifted_columns(table.codes)
    for lk_d, lk_s in zip(dense, sparse, strict=True):
        a, b = lk_d.lookup(shifted), lk_s.lookup(shifted)
        assert a.tolist() == b.tolist()
        for j in np.flatnonzero(a >= 0):
            per_record[j].add(int(lk_d.rows[a[j]]))
    cand_set = {tuple(c) for c in cands.tolist()}
    for j, ids in enumerate(table.attribute_ids()):
        expected = {
            i
            for i, c in enumerate(cands.tolist())
            if tuple(c) in cand_set and set(c) <= set(ids.tolist())
        }
        assert per_record[j] == expected


def test_contains() -> None:
    """contains() finds rows of a sorted haystack."""
    hay = np.array([[0, 2], [0, 3], [1, 3]])
    assert contains(hay, np.array([[0, 3], [1, 2], [1, 3]]), 4).tolist() == [True, False, True]


def _random_survivors(rng: np.random.Generator, dom, k: int, keep: float) -> CombinationCounts:
    attr_col = dom.attribute_columns()
    rows = [
        c
        for c in itertools.combinations(range(dom.n_attributes), k)
        if len({attr_col[a] for a in c}) == k and rng.random() < keep
    ]
    return CombinationCounts(
        np.array(rows, dtype=np.int32).reshape(-1, k), np.ones(len(rows), dtype=np.int64)
    )


def test_compiled_join_grouping_and_lookups_equal_numpy_paths(monkeypatch) -> None:
    """Compiled join, counting-sort grouping, lookup keys and V_1 give the numpy results."""
    from sds_core.marginals import combinations as comb_mod

    rng = np.random.default_rng(5)
    header = ["A", "B", "C", "D", "E", "F"]
    rows = [[f"{h}{rng.integers(0, 5)}" for h in header] for _ in range(300)]
    table = table_from_rows(header, rows)
    dom = table.domain
    results = {}
    for compiled in (True, False):
        monkeypatch.setattr(comb_mod, "HAVE_NUMBA", compiled)
        got = [occurring_attributes(dom, table.codes)]
        for k, keep in ((2, 0.8), (3, 0.6), (4, 0.5)):
            got.append(candidates_from_survivors(_random_survivors(rng_k(k), dom, k, keep), dom))
        groups = comb_mod.group_by_clique(dom, got[2])
        lookups = build_lookups(dom, got[2], n_records=table.n_records, dense_budget=2000)
        results[compiled] = (got, groups, lookups)
    (a, ga, la), (b, gb, lb) = results[True], results[False]
    assert all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(a, b, strict=True))
    assert sum(x.shape[0] for x in a[1:]) > 100  # non-trivial candidate sets
    assert [g[0] for g in ga] == [g[0] for g in gb]
    assert all(np.array_equal(x[1], y[1]) for x, y in zip(ga, gb, strict=True))
    assert any(lk.table is None for lk in la) and any(lk.table is not None for lk in la)
    for x, y in zip(la, lb, strict=True):
        assert x.cols == y.cols and np.array_equal(x.rows, y.rows)
        assert np.array_equal(x.keys, y.keys)
        assert (x.table is None) == (y.table is None)
        assert x.table is None or np.array_equal(x.table, y.table)


def rng_k(k: int) -> np.random.Generator:
    """The same random survivors for both paths of the comparison above."""
    return np.random.default_rng(100 + k)


def test_lookups_of_unsorted_candidates_are_sorted_by_key() -> None:
    """build_lookups sorts a clique's keys itself when the candidates come unsorted."""
    table = table_from_rows(["A", "B"], [["a1", "b1"], ["a2", "b2"], ["a3", "b1"]])
    dom = table.domain
    cands = np.array([[2, 4], [0, 3], [1, 4], [0, 4]], dtype=np.int32)
    (lk,) = build_lookups(dom, cands)
    assert (lk.keys[1:] > lk.keys[:-1]).all()
    assert sorted(lk.rows.tolist()) == [0, 1, 2, 3] and lk.rows[0] == 1
