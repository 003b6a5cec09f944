"""Tests of sds_core.exact: the seed's worked examples and the map-reduce counting."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
from table_fixtures import table_from_rows

from sds_core.errors import SdsInputError
from sds_core.exact import exact_aggregates, record_sensitivities

SEED_ROWS = [
    ["a1", "b1", "c1"],
    ["a1", "b2", "c1"],
    ["a2", "", "c2"],
    ["a2", "b2", "c1"],
    ["a1", "b2", ""],
]

SEED_COUNTS = {
    "A:a1": 3, "A:a2": 2, "B:b1": 1, "B:b2": 3, "C:c1": 3, "C:c2": 1,
    "A:a1;B:b1": 1, "A:a1;B:b2": 2, "A:a1;C:c1": 2, "A:a2;B:b2": 1, "A:a2;C:c1": 1,
    "A:a2;C:c2": 1, "B:b1;C:c1": 1, "B:b2;C:c1": 2,
    "A:a1;B:b1;C:c1": 1, "A:a1;B:b2;C:c1": 1, "A:a2;B:b2;C:c1": 1,
}  # fmt: skip


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
    from sds_core.exact import count_cliques

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
