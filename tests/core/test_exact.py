"""Tests of sds_core.marginals.exact_counts: the seed's worked examples and the map-reduce
counting."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
from table_fixtures import table_from_rows

from sds_core.data.domain import EMPTY_CODE, Domain
from sds_core.data.table import PreparedTable
from sds_core.errors import SdsInputError
from sds_core.marginals.exact_counts import exact_aggregates, record_sensitivities

SEED_ROWS = [
    ["a1", "b1", "c1"],
    ["a1", "b2", "c1"],
    ["a2", "", "c2"],
    ["a2", "b2", "c1"],
    ["a1", "b2", ""],
]

SEED_COUNTS = {
    "A:a1": 3,
    "A:a2": 2,
    "B:b1": 1,
    "B:b2": 3,
    "C:c1": 3,
    "C:c2": 1,
    "A:a1;B:b1": 1,
    "A:a1;B:b2": 2,
    "A:a1;C:c1": 2,
    "A:a2;B:b2": 1,
    "A:a2;C:c1": 1,
    "A:a2;C:c2": 1,
    "B:b1;C:c1": 1,
    "B:b2;C:c1": 2,
    "A:a1;B:b1;C:c1": 1,
    "A:a1;B:b2;C:c1": 1,
    "A:a2;B:b2;C:c1": 1,
}


def _brute_force(rows: list[list[str]], header: list[str], r: int) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for row in rows:
        attrs = sorted(f"{h}:{v}" for h, v in zip(header, row, strict=True) if v not in ("", "0"))
        for k in range(1, r + 1):
            for combo in itertools.combinations(attrs, k):
                counts[";".join(combo)] += 1
    return dict(counts)


def test_seed_five_record_table() -> None:
    """The seed's 5-record table gives exactly its 17 counts at R=3."""
    agg = exact_aggregates(table_from_rows(["A", "B", "C"], SEED_ROWS), 3)
    assert not agg.is_dp and agg.protected_number_of_records is None
    assert agg.to_text_dict() == SEED_COUNTS
    assert agg.total_combinations() == 17


def test_seed_sensitivities() -> None:
    """The seed's sensitivity example: C(w_j, 2) = (3, 3, 1), max 3."""
    t = table_from_rows(["A", "B", "C"], [["a1", "b1", "c1"], ["a1", "b2", "c1"], ["a2", "", "c2"]])
    sens = record_sensitivities(t, 2)
    assert sens[:, 1].tolist() == [3, 3, 1]
    assert sens[:, 0].tolist() == [3, 3, 2]
    assert int(sens[:, 1].max()) == 3


def test_chunked_equals_brute_force() -> None:
    """Random table: chunked map-reduce counts equal a brute-force count, for any chunk size."""
    rng = np.random.default_rng(7)
    header = ["A", "B", "C", "D", "E"]
    rows = [
        [("" if rng.random() < 0.2 else f"{h.lower()}{rng.integers(1, 4)}") for h in header]
        for _ in range(200)
    ]
    table = table_from_rows(header, rows)
    expected = _brute_force(rows, header, 4)
    for chunk in (7, 64, 1000):
        assert exact_aggregates(table, 4, chunk_records=chunk).to_text_dict() == expected


def test_sparse_path_equals_dense_path() -> None:
    """Cliques counted with sort+unique (budget 0) equal the dense bincount path."""
    from sds_core.marginals.exact_counts import count_cliques

    rng = np.random.default_rng(3)
    header = ["A", "B", "C"]
    rows = [[f"{h}{rng.integers(1, 6)}" for h in header] for _ in range(300)]
    table = table_from_rows(header, rows)
    cliques = list(itertools.combinations(range(3), 2))
    dense = count_cliques(table, cliques, chunk_records=50)
    sparse = count_cliques(table, cliques, chunk_records=50, dense_budget=0)
    for cols in cliques:
        assert dense[cols][0].tolist() == sparse[cols][0].tolist()
        assert dense[cols][1].tolist() == sparse[cols][1].tolist()


def test_reporting_length_above_columns_is_empty() -> None:
    """Lengths above the number of columns have no combinations."""
    agg = exact_aggregates(table_from_rows(["A", "B", "C"], SEED_ROWS), 5)
    assert len(agg.counts_of(4)) == 0 and len(agg.counts_of(5)) == 0
    assert len(agg.counts_of(3)) == 3


@pytest.mark.parametrize(
    ("rows", "r", "match"),
    [
        ([], 3, "table is empty"),
        (SEED_ROWS, 0, "reporting_length must be"),
    ],
)
def test_bad_input(rows: list, r: int, match: str) -> None:
    """Empty table and reporting length < 1 raise SdsInputError."""
    with pytest.raises(SdsInputError, match=match):
        exact_aggregates(table_from_rows(["A", "B", "C"], rows), r)


def _random_table(
    rng: np.random.Generator, cards: list[int], n: int, empty: float
) -> PreparedTable:
    domain = Domain(
        tuple(f"C{j}" for j in range(len(cards))),
        tuple(tuple(f"v{i:03d}" for i in range(c)) for c in cards),
    )
    codes = np.column_stack([rng.integers(0, c, n) for c in cards]).astype(np.int32)
    codes[rng.random(codes.shape) < empty] = EMPTY_CODE
    return PreparedTable(domain, codes)


def _brute_force_codes(table: PreparedTable, r: int) -> dict[tuple[int, ...], int]:
    offsets = table.domain.offsets
    counts: Counter[tuple[int, ...]] = Counter()
    for row in table.codes.tolist():
        attrs = [offsets[j] + c for j, c in enumerate(row) if c >= 0]
        for k in range(1, r + 1):
            counts.update(itertools.combinations(attrs, k))
    return dict(counts)


@pytest.mark.parametrize(
    ("cards", "empty", "r"),
    [([3, 1, 4, 2, 5], 0.3, 3), ([2, 2], 0.0, 4), ([7, 300, 2, 40], 0.5, 3), ([1], 1.0, 2)],
)
def test_random_tables_equal_brute_force(cards: list[int], empty: float, r: int) -> None:
    """Random code tables (empty cells, no empty cells, k > columns, all-empty): exact counts."""
    table = _random_table(np.random.default_rng(len(cards)), cards, 500, empty)
    agg = exact_aggregates(table, r, chunk_records=97)
    got = {
        tuple(row): c
        for k in range(1, r + 1)
        for row, c in zip(
            agg.counts_of(k).attrs.tolist(), agg.counts_of(k).counts.tolist(), strict=True
        )
    }
    assert got == _brute_force_codes(table, r)
    for k in range(1, r + 1):
        cc = agg.counts_of(k)
        assert cc.attrs.dtype == np.int32 and cc.counts.dtype == np.int64
        assert cc.attrs.tolist() == sorted(cc.attrs.tolist())  # rows sorted lexicographically


def test_dense_and_sparse_cliques_agree_with_empty_cells() -> None:
    """Compiled dense counting and chunked sort+unique give the same keys and counts."""
    from sds_core.marginals.exact_counts import count_cliques

    table = _random_table(np.random.default_rng(5), [4, 60, 3, 9], 700, 0.25)
    cliques = [c for k in (1, 2, 3) for c in itertools.combinations(range(4), k)]
    dense = count_cliques(table, cliques, chunk_records=128)
    sparse = count_cliques(table, cliques, chunk_records=128, dense_budget=0)
    for cols in cliques:
        assert dense[cols][0].tolist() == sparse[cols][0].tolist()
        assert dense[cols][1].tolist() == sparse[cols][1].tolist()
        assert int(dense[cols][1].sum()) == int((table.codes[:, list(cols)] >= 0).all(axis=1).sum())


def test_compiled_kernels_equal_their_python_form() -> None:
    """Each numba kernel returns what its plain-Python body returns (when numba is present)."""
    from sds_core.marginals import _count_kernels as ck

    if not hasattr(ck.count_dense, "py_func"):
        pytest.skip("numba absent or disabled: the kernels run as Python already")
    table = _random_table(np.random.default_rng(9), [3, 5, 2], 300, 0.2)
    codes = ck.compact_codes(table.codes)
    key = ck.CliqueKey(np.array([0, 2], dtype=np.int64), np.array([3, 1], dtype=np.int64))
    for size in (12, 5000):  # interleaved lanes (small arrays) and one array
        fast, slow = np.zeros(size, dtype=np.int32), np.zeros(size, dtype=np.int32)
        ck.count_dense(codes, key, fast)
        ck.count_dense.py_func(codes, key, slow)
        assert fast.tolist() == slow.tolist() and int(fast.sum()) == 300
    o, s = codes[:, :200].astype(np.int64) + 1, codes[:, 200:].astype(np.int64) + 1
    tables = ck.ComparedTables(o, s, 100, 200)
    for cells in (12, 5000, 100_000):  # lanes, scan of the cells, revisit of the records
        acc = np.zeros((1, cells), dtype=np.int64)
        fast = ck.abs_difference(tables, key, acc, cells)
        assert not acc.any()
        assert fast == ck.abs_difference.py_func(tables, key, acc, cells)
    assert ck.local_keys_of(codes, key).tolist() == ck.local_keys_of.py_func(codes, key).tolist()
