"""The rows of one period (sds_release.store.inputs.periods): the period filter where the input is
read, its refusals before any charge (pre-flight and the flow's ingest alike), and each subject
counted in one period."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest

from sds_core.errors import SdsInputError, SdsInternalError
from sds_release.store.config import build_params
from sds_release.store.inputs.ingest import read_release_input
from sds_release.store.inputs.periods import PeriodFilter, count_each_subject_once, select_period
from sds_release.store.inputs.preflight import preflight
from sds_release.store.ledger.book import Ledger
from sds_release.store.ledger.values import BudgetExceededError, PeriodMismatchError
from sds_release.store.run.release_run import reserve
from sds_release.store.workspace.subjects import SubjectRecord
from tests.helpers import periodic_config, write_periodic_csv

TABLE = pa.table(
    {
        "Month": ["2026-09", " 2026-10", "2026-10 ", "2026-09"],
        "pid": ["a", "b", "B ", "c"],
        "x": ["1", "2", "3", "4"],
    }
)


def test_select_period_keeps_its_rows_and_drops_the_column() -> None:
    """Rows whose period cell is the period (trimmed), the column matched case-insensitively
    and never kept."""
    out = select_period(TABLE, PeriodFilter("month", "2026-10"), source="in.csv")
    assert out.column_names == ["pid", "x"]
    assert out.column("x").to_pylist() == ["2", "3"]


def test_periods_stored_as_dates_or_numbers_are_read_in_the_format() -> None:
    """A Parquet period column of dates holds the period of each date (a day, its month, its
    quarter); one of integers holds the period's digits (202609 is 2026-09)."""
    days = [dt.date(2026, 9, 1), dt.date(2026, 10, 1), dt.date(2026, 10, 31)]
    dates = pa.table({"day": pa.array(days), "x": [1, 2, 3]})
    out = select_period(dates, PeriodFilter("day", "2026-10-01", "YYYY-MM-DD"), source="in.pq")
    assert out.column("x").to_pylist() == [2]
    assert select_period(dates, PeriodFilter("day", "2026-10"), source="p").num_rows == 2
    assert select_period(dates, PeriodFilter("day", "2026-Q3", "YYYY-Qn"), source="p").num_rows == 1
    stamps = pa.table({"t": pa.array(days, pa.date32()).cast(pa.timestamp("s")), "x": [1, 2, 3]})
    assert select_period(stamps, PeriodFilter("t", "2026", "YYYY"), source="p").num_rows == 3
    months = pa.table({"m": pa.array([202609, 202610], pa.int64()), "x": [1, 2]})
    assert select_period(months, PeriodFilter("m", "2026-09"), source="p").num_rows == 1


def test_a_cell_in_another_spelling_is_refused() -> None:
    """A cell that is no period of the format (2026-1, 2026-10-01 for months, 202613) is
    refused, naming its row and the format, not its value: a row has one period."""
    for cells, fmt in (
        (["2026-10", "2026-1"], "YYYY-MM"),
        (["2026-10", "2026-10-01"], "YYYY-MM"),
        (["2026-Q4", "2026Q4"], "YYYY-Qn"),
        (pa.array([202610, 202613]), "YYYY-MM"),
    ):
        table = pa.table({"month": cells, "x": ["1", "2"]})
        wanted = PeriodFilter("month", "2026-10" if fmt == "YYYY-MM" else "2026-Q4", fmt)
        with pytest.raises(
            SdsInputError,
            match=rf"not periods written {fmt} \(the first is "
            r"data row 2\).*Nothing was charged",
        ) as caught:
            select_period(table, wanted, source="in.csv")
        assert "2026-1'" not in str(caught.value) and "202613" not in str(caught.value)


def test_a_period_filter_refuses_a_label_not_in_its_format() -> None:
    """The filter itself refuses a label with spaces or in another format (ReleaseParams
    refuses it first)."""
    with pytest.raises(SdsInputError, match=r"'2026-10 ' has leading or trailing whitespace"):
        PeriodFilter("month", "2026-10 ")
    with pytest.raises(SdsInputError, match=r"'2026-10' is not a period written YYYY-Qn"):
        PeriodFilter("month", "2026-10", "YYYY-Qn")


@pytest.mark.parametrize(
    ("table", "wanted", "match"),
    [
        (
            TABLE,
            PeriodFilter("week", "2026-10"),
            r"period_column 'week' is not a column of input 'in.csv'.*set period_column",
        ),
        (
            TABLE,
            PeriodFilter("month", "2026-11"),
            r"no row of period '2026-11' in its period column 'Month'; check --period",
        ),
        (
            pa.table({"month": ["2026-09", " ", "2026-09"], "x": ["1", "2", "3"]}),
            PeriodFilter("month", "2026-09"),
            r"'month' is empty in some rows \(the first is data row 2\).*fill in",
        ),
        (
            pa.table({"month": pa.array(["2026-09", None]), "x": ["1", "2"]}),
            PeriodFilter("month", "2026-09"),
            r"empty in some rows \(the first is data row 2\)",
        ),
    ],
    ids=["column-missing", "period-absent", "empty-cell", "null-cell"],
)
def test_bad_periods_are_refused(table: pa.Table, wanted: PeriodFilter, match: str) -> None:
    """A missing period column, a period without rows and rows without a period are refused,
    each naming the column or value and the fix (no cell value is quoted)."""
    with pytest.raises(SdsInputError, match=match):
        select_period(table, wanted, source="in.csv")


def test_period_filter_needs_both_names() -> None:
    """Both or neither of period_column and period (ReleaseParams makes sure of it)."""
    assert PeriodFilter.of(None, None) is None
    with pytest.raises(SdsInternalError):
        PeriodFilter.of("month", None)


def test_subjects_counted_elsewhere_lose_their_rows() -> None:
    """The ids asked about are matched as preparation matches them; rows of subjects counted
    in another period are left out; a period of only such subjects is refused."""
    asked: list[set[str]] = []

    def elsewhere(ids: set[str]) -> set[str]:
        asked.append(ids)
        return {"b"}

    out = count_each_subject_once(TABLE, "PID", elsewhere, period="2026-10")
    assert asked == [{"a", "b", "c"}]
    assert out.column("x").to_pylist() == ["1", "4"]  # both rows of 'b' / 'B ' left out
    with pytest.raises(SdsInputError, match=r"every subject of period '2026-10' already"):
        count_each_subject_once(TABLE, "pid", lambda ids: ids, period="2026-10")


@pytest.fixture
def periodic(tmp_path: Path, tiny_csv: Path) -> tuple[Path, Path, Path]:
    """(input, config, home): two months of 100 rows; a per-period budget of ε 4."""
    data = write_periodic_csv(
        tiny_csv,
        tmp_path / "monthly.csv",
        {"2026-09": range(100), "2026-10": range(100, 200)},
        subjects={"2026-09": range(100), "2026-10": range(100, 200)},
    )
    config = tmp_path / "monthly.toml"
    config.write_text(periodic_config())
    home = tmp_path / "home"
    home.mkdir()
    Ledger.open(home).set_budget("monthly", epsilon=4.0, delta=1e-3, per_period=True)
    return data, config, home


def _params(data: Path, config: Path, home: Path, **overrides: object) -> object:
    """The release's parameters; an override of None removes that key of the config."""
    from sds_release.store.config import load_config

    cfg = {k: v for k, v in load_config(config).items() if overrides.get(k, v) is not None}
    return build_params(
        cfg, {"input": str(data), "home": str(home), "release_id": "r1", **overrides}
    )


def test_preflight_reads_the_rows_of_the_period(periodic: tuple[Path, Path, Path]) -> None:
    """A period present in the data passes the pre-flight; the table read is its rows only."""
    data, config, home = periodic
    preflight(_params(data, config, home, period="2026-09"))  # type: ignore[arg-type]
    table, _ = read_release_input(data, delimiter=",", period=PeriodFilter("month", "2026-09"))
    assert table.num_rows == 100 and "month" not in table.column_names


@pytest.mark.parametrize(
    ("overrides", "error", "match"),
    [
        ({"period": "2026-11"}, SdsInputError, r"no row of period '2026-11'"),
        ({"period": "2026-09", "period_column": "week"}, SdsInputError, "not a column of input"),
        ({"period": "2026-09", "dataset": "lifetime"}, PeriodMismatchError, "lifetime budget"),
        ({"period": None, "period_column": None}, PeriodMismatchError, "pass --period V"),
        ({"period": "2026-09", "dataset": "nobody"}, BudgetExceededError, "--per-period"),
    ],
    ids=["period-absent", "column-missing", "lifetime-dataset", "no-period", "no-budget"],
)
def test_preflight_refuses_bad_periods_before_any_charge(
    periodic: tuple[Path, Path, Path], overrides: dict, error: type, match: str
) -> None:
    """Each refusal names the fix, and the ledger holds no reservation afterwards."""
    data, config, home = periodic
    Ledger.open(home).set_budget("lifetime", epsilon=10.0, delta=1e-3)
    params = _params(data, config, home, **overrides)
    with pytest.raises(error, match=match):
        preflight(params)  # type: ignore[arg-type]
    assert Ledger.open(home).reservations() == []


def test_an_empty_period_cell_is_refused(periodic: tuple[Path, Path, Path]) -> None:
    """A row without a period (empty cell) is refused by the pre-flight, naming the row."""
    data, config, home = periodic
    lines = data.read_text().splitlines()
    lines[5] = "," + lines[5].split(",", 1)[1]
    data.write_text("\n".join(lines) + "\n")
    with pytest.raises(SdsInputError, match=r"empty in some rows \(the first is data row 5\)"):
        preflight(_params(data, config, home, period="2026-09"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"period": "2026-09", "period_column": None}, "no period_column names the column"),
        ({"period": None}, r"makes dataset 'monthly' periodic.*pass --period V"),
        ({"period": "2026-09", "executor": "dask"}, r"not supported with executor 'dask'.*local"),
        ({"period": "2026-09", "use_columns": ["month", "sex"]}, "lists the period column"),
        (
            {"period": "2026-09 "},
            r"'2026-09 ' has leading or trailing whitespace.*remove the spaces.*Nothing was read",
        ),
        ({"period": "2026-9"}, r"'2026-9' is not a period written YYYY-MM \(e.g. 2026-10\)"),
        ({"period": "2026-Q3"}, r"declare the dataset's periods as YYYY-Qn \(period_format\)"),
        (
            {"period": "previous-month", "period_format": "YYYY"},
            r"'previous-month' names a period written YYYY-MM.*--period 2026\)",
        ),
        ({"period": None, "period_column": None, "period_format": "YYYY"}, "no period_column"),
    ],
    ids=[
        "no-period-column",
        "no-period",
        "dask",
        "period-released",
        "whitespace",
        "no-zero",
        "other-format",
        "relative-in-years",
        "format-without-column",
    ],
)
def test_parameters_refuse_a_period_that_does_not_fit(
    periodic: tuple[Path, Path, Path], overrides: dict, match: str
) -> None:
    """--period without period_column, period_column without --period, the Dask executor, and a
    released period column: refused when the parameters are built, before anything is read."""
    data, config, home = periodic
    with pytest.raises(SdsInputError, match=match):
        _params(data, config, home, **overrides)


def test_the_flow_refuses_an_absent_period_and_charges_nothing(
    periodic: tuple[Path, Path, Path],
) -> None:
    """Without the CLI's pre-flight (a deployment), the ingest task refuses the same way after
    the reservation, and the failed release gives its whole reservation back."""
    from sds_release.store.executor.local import LocalExecutor
    from sds_release.tasks.ingest import read_input

    data, config, home = periodic
    data.write_text(data.read_text().replace("2026-09", "2026-08"))  # after the pre-flight
    run = reserve(_params(data, config, home, period="2026-09"))  # type: ignore[arg-type]
    with pytest.raises(SdsInputError, match="no row of period '2026-09'") as caught:
        read_input.fn(run, LocalExecutor())
    run.mark_failed(caught.value, [])
    ledger = Ledger.open(home)
    assert ledger.charges() == []
    assert ledger.reservation("r1").status == "cancelled"  # type: ignore[union-attr]
    assert ledger.budget("monthly", "2026-09").epsilon_remaining == 4.0  # type: ignore[union-attr]


def test_subject_periods_run_one_at_a_time_and_need_their_record(
    tmp_path: Path, tiny_csv: Path
) -> None:
    """With a subject id, ingest assigns the period's subjects before any charge; while another
    period's release is open, or if the record is gone while another period has spent, the
    release is refused (its subjects could count by timing, or twice) and nothing is charged."""
    import shutil

    from sds_release.store.executor.local import LocalExecutor
    from sds_release.tasks.ingest import read_input

    data = write_periodic_csv(
        tiny_csv,
        tmp_path / "monthly.csv",
        {"2026-09": range(50), "2026-10": range(50, 100)},
        subjects={"2026-09": range(50), "2026-10": range(25, 75)},
    )
    config = tmp_path / "monthly.toml"
    config.write_text(periodic_config(subject=True))
    home = tmp_path / "home"
    home.mkdir()
    ledger = Ledger.open(home)
    ledger.set_budget("monthly", epsilon=4.0, delta=1e-3, per_period=True)
    sep = reserve(_params(data, config, home, period="2026-09"))  # type: ignore[arg-type]
    table, _ = read_input.fn(sep, LocalExecutor())
    assert table.value.num_rows == 50
    assert SubjectRecord(home, "monthly").periods() == {"2026-09": 50}
    ledger.charge(sep.release_id, "count")  # the period has spent
    octo = reserve(  # type: ignore[arg-type]
        _params(data, config, home, period="2026-10", release_id="r2")
    )
    with pytest.raises(SdsInputError, match=r"r1 \(period 2026-09\) of dataset 'monthly' are"):
        # September's release is still open: periods run one at a time
        read_input.fn(octo, LocalExecutor())
    assert SubjectRecord(home, "monthly").periods() == {"2026-09": 50}  # none to October
    ledger.cancel(sep.release_id)  # abandoned after its count: its spend stays
    table, _ = read_input.fn(octo, LocalExecutor())
    assert table.value.num_rows == 25  # s25..s49 count in September
    ledger.cancel(octo.release_id)
    shutil.rmtree(home / "private" / "_periods")
    nov = reserve(  # type: ignore[arg-type]
        _params(data, config, home, period="2026-10", release_id="r3")
    )
    with pytest.raises(SdsInputError, match=r"no record of which period.*Restore that folder"):
        read_input.fn(nov, LocalExecutor())
    assert ledger.charges(release_id="r3") == []
