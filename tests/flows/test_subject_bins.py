"""DP quantile bins are subject-level (issue #27 point 5): with ``subject_id`` the ``binning``
stage reads one number per subject, so a subject with many rows moves the edges as much as a
subject with one row."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from sds_core.errors import SdsInputError
from sds_release.store.config import build_params
from sds_release.store.executor.local import LocalExecutor
from sds_release.store.ledger.book import Ledger
from sds_release.store.run.release_run import ReleaseRun, SensitiveTable, reserve
from sds_release.tasks.preparation import choose_bins

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pums_ca_10k.csv"
SCHEMA = {
    "columns": [
        {"name": "age", "type": "integer", "min": 0, "max": 120, "bins": {"dp_quantiles": 4}},
        {"name": "sex"},
    ]
}


def _people(heavy_rows: int) -> pa.Table:
    """3000 one-row subjects (PUMS ages), plus one subject with ``heavy_rows`` rows at age 97."""
    frame = pd.read_csv(EXAMPLE, dtype=str, keep_default_na=False)[["age", "sex"]].iloc[:3000]
    frame.insert(0, "pid", [f"p{i}" for i in range(3000)])
    heavy = pd.DataFrame({"pid": ["heavy"] * heavy_rows, "age": "97", "sex": "1"})
    return pa.Table.from_pandas(pd.concat([frame, heavy], ignore_index=True), preserve_index=False)


def _run(home: Path, release_id: str, subject_id: str | None) -> ReleaseRun:
    """A reserved release of ε = 4 (ε_b = 5% = 0.2) with a fixed seed."""
    params = build_params(
        {
            "dataset": "people",
            "input": "people.csv",
            "home": str(home),
            "epsilon": 4.0,
            "seed": 20240607,
            "release_id": release_id,
            "use_columns": ["age", "sex"],
            "subject_id": subject_id,
            "table_schema": SCHEMA,
            "default_budget": {"epsilon": 100.0, "delta": 1e-3},
        },
        {},
    )
    return reserve(params)


def _edges(home: Path, release_id: str, table: pa.Table, subject_id: str | None) -> list[float]:
    run = _run(home, release_id, subject_id)
    return choose_bins.fn(run=run, table=SensitiveTable(table), executor=LocalExecutor())["age"]


def test_a_heavy_subject_moves_the_edges_like_one_subject(tmp_path: Path) -> None:
    """1500 rows of one subject at age 97 leave the edges (32, 42, 55) as they are (one value
    among 3001); read per row they moved them to (37, 55, 94)."""
    alone = _edges(tmp_path / "a", "bins", _people(1), "pid")  # same id and seed: same noise
    heavy = _edges(tmp_path / "b", "bins", _people(1500), "pid")
    assert heavy == alone == [0, 32, 42, 55, 120]
    per_row = _edges(tmp_path / "c", "bins", _people(1500), None)  # no subject id: per row
    assert per_row == [0, 37, 55, 94, 120]


def test_a_missing_subject_id_is_refused_before_the_binning_charge(tmp_path: Path) -> None:
    """A row without a subject id: the join's error, and nothing charged."""
    table = _people(3)
    table = table.set_column(0, "pid", pa.array([*table.column("pid").to_pylist()[:-1], None]))
    run = _run(tmp_path, "missing", "pid")
    with pytest.raises(SdsInputError, match=r"missing/empty Subject ID.*'pid'"):
        choose_bins.fn(run=run, table=SensitiveTable(table), executor=LocalExecutor())
    assert Ledger.open(run.home).charges(release_id="missing") == []


def _with_subject(rows: list[tuple[str, str]]) -> pa.Table:
    """3000 one-row subjects plus subject "two" with ``rows`` (age, sex)."""
    table = _people(1)
    extra = {"pid": ["two"] * len(rows), "age": [a for a, _ in rows], "sex": [s for _, s in rows]}
    return pa.concat_tables([table, pa.table(extra, schema=table.schema)])


@pytest.mark.parametrize(
    ("rows", "column"),
    [
        ([("20", "1"), ("70", "1")], "age"),  # two bins: the join refused it after the charge
        ([("33", "1"), ("34", "1")], "age"),  # one bin, but the bins are not drawn yet
        ([("20", "1"), ("20", "2")], "sex"),  # a column without bins
    ],
)
def test_subject_rows_that_disagree_are_refused_before_the_binning_charge(
    tmp_path: Path, rows: list[tuple[str, str]], column: str
) -> None:
    """A subject whose rows hold two values of a column is refused by the binning stage before
    its charge (it is a property of the raw values): the column named, nothing charged, and
    the ledger holds only the reservation."""
    run = _run(tmp_path, "split", "pid")
    ledger = Ledger.open(run.home)
    before = ledger.budget("people")
    with pytest.raises(SdsInputError, match=rf"different values in column\(s\) {column}\b"):
        choose_bins.fn(run=run, table=SensitiveTable(_with_subject(rows)), executor=LocalExecutor())
    assert ledger.charges(release_id="split") == []
    assert ledger.budget("people") == before
    with pytest.raises(SdsInputError, match=r"Nothing was charged"):
        choose_bins.fn(run=run, table=SensitiveTable(_with_subject(rows)), executor=LocalExecutor())
