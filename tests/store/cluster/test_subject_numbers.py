"""The Dask input gives the DP quantile mechanism the local numbers, one per subject with
``subject_id`` even when a subject's rows span parts (issue #27 point 5)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

distributed = pytest.importorskip("distributed")

from sds_core.dp.quantiles import subject_numbers  # noqa: E402
from sds_release.store.cluster.inputs import DaskInput, column_numbers  # noqa: E402


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """An in-process Dask cluster of 2 single-thread workers."""
    with distributed.Client(
        processes=False, n_workers=2, threads_per_worker=1, dashboard_address=None
    ) as c:
        yield c


def test_subject_numbers_on_parts_equal_the_whole_column(client: Any) -> None:
    """3 parts, subjects spread over them (ids differing in case and spaces), non-numbers and
    a record limit: the same numbers as locally; without subject_id, one number per row."""
    rng = np.random.default_rng(5)
    n = 900
    ids = [f"{' ' if i % 7 == 0 else ''}P{i % 200}" for i in rng.permutation(n)]
    ids = [s.lower() if i % 3 == 0 else s for i, s in enumerate(ids)]
    ages = [str(a) if a % 11 else "n/a" for a in rng.integers(0, 100, n).tolist()]
    table = pa.table({"pid": ids, "age": ages})
    bounds = [0, 250, 600, n]
    parts = [table.slice(lo, hi - lo) for lo, hi in itertools.pairwise(bounds)]
    data = DaskInput(
        client,
        tuple(client.scatter(parts, hash=False)),  # slices share buffers: one token
        tuple(p.num_rows for p in parts),
        ("pid", "age"),
        "test",
    )
    limit = 800
    parsed = np.array([float(a) if a != "n/a" else np.nan for a in ages[:limit]])
    expected = subject_numbers(parsed, ids[:limit], subject_column="pid")[1]
    first = data.first_rows(limit)  # the record limit falls in the third part
    assert first.rows == (250, 350, 200)
    got = column_numbers(first, "age", "PID ")
    assert got.shape[0] == len({s.strip().lower() for s in ids[:limit]}) == 200
    assert np.array_equal(got, expected)
    assert np.array_equal(column_numbers(first, "age"), parsed[~np.isnan(parsed)])


def test_subject_conflicts_across_parts(client: Any) -> None:
    """A subject whose two rows sit in different parts and disagree on a DP-binned column is
    found on the workers (before the binning charge), as the local join check finds it."""
    from sds_core.data.preparation import PrepareParams, subject_values
    from sds_release.store.cluster.inputs import subject_conflicts

    ids = [f"P{i}" for i in range(300)] + ["p7 "]  # P7's second row, in the last part
    ages = [str(20 + i % 50) for i in range(300)]
    params = PrepareParams(subject_id="pid", use_columns=("age", "sex"))
    for last_age, expected in ((ages[7], []), ("99", ["age"])):
        table = pa.table({"pid": ids, "age": [*ages, last_age], "sex": ["1"] * 301})
        parts = [table.slice(0, 150), table.slice(150)]
        data = DaskInput(
            client,
            tuple(client.scatter(parts, hash=False)),
            tuple(p.num_rows for p in parts),
            ("pid", "age", "sex"),
            "test",
        )
        assert subject_values(table, params).conflicts() == expected
        assert subject_conflicts(data, params, ["age"]) == expected
        assert (
            subject_conflicts(data, PrepareParams(subject_id="pid", record_limit=300), ["age"])
            == []
        )
