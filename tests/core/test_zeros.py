"""The zero rule seen from the input: which columns hold "0" cells that preparation empties."""

from __future__ import annotations

import pyarrow as pa
import pytest

from sds_core.data.params import PrepareParams
from sds_core.data.preparation import prepare
from sds_core.data.zeros import zero_columns, zero_shares


def _table() -> pa.Table:
    return pa.table(
        {
            "Sex": ["0", "1", " 0 ", "1"],
            "age": ["30", "40", "0", ""],
            "n": pa.array([0, 1, 2, None], type=pa.int64()),
            "x": pa.array([0.0, 1.5, 0.0, 2.0]),
            "flag": pa.array([False, True, False, True]),
        }
    )


def test_shares_of_zero_cells_per_column() -> None:
    """Text "0" (trimmed), integer 0 and float 0.0 count; booleans never read as "0"."""
    assert zero_shares(_table()) == {"Sex": 0.5, "age": 0.25, "n": 0.25, "x": 0.5}


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"sensitive_zeros": ["sex"]}, {"age", "n", "x"}),  # case-insensitive, as prepare
        ({"sensitive_zeros": ["all"]}, set()),
        ({"use_columns": ["AGE", "flag"]}, {"age"}),
        ({"record_limit": 2}, {"Sex", "n", "x"}),
    ],
)
def test_used_columns_kept_zeros_and_record_limit(kwargs: dict, expected: set) -> None:
    """Only used columns not in sensitive_zeros are listed; record_limit looks at first rows."""
    assert set(zero_shares(_table(), **kwargs)) == expected


def test_listed_columns_are_exactly_those_preparation_empties() -> None:
    """A column is listed iff preparing it without sensitive_zeros loses its "0" label."""
    table = _table().select(["Sex", "age", "n", "x"])
    kept = prepare(table, PrepareParams(sensitive_zeros=("Sex", "age", "n", "x"))).domain
    dropped = prepare(table, PrepareParams()).domain
    lost = {
        c
        for c, with_zero, without in zip(kept.columns, kept.labels, dropped.labels, strict=True)
        if "0" in with_zero and "0" not in without
    }
    assert lost == set(zero_shares(table))


def test_zero_columns_expands_all() -> None:
    """`all` names every header; other names match case-insensitively and trimmed."""
    assert zero_columns(["A", "b"], ["all"]) == ("A", "b")
    assert zero_columns(["A", "b"], [" a "]) == ("A",)
    assert zero_columns(["A", "b"], []) == ()
