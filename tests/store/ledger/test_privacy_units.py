"""A dataset's privacy unit (sds_release.store.ledger.units), found by the guarantee fuzz test:
every release of a dataset counts the same record (rows, or subjects of one column). The ledger
records each reservation's unit and refuses one whose unit is not the dataset's, before anything is
reserved; a cancelled reservation that spent nothing, and one recorded before units, fix none.
`sds release` refusing another unit: tests/flows/test_privacy_unit_release.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sds_release.store.ledger.book import Ledger
from sds_release.store.ledger.chain import append_row
from sds_release.store.ledger.units import ROWS, privacy_unit
from sds_release.store.ledger.values import PlannedCharge, UnitMismatchError

PLAN = [PlannedCharge("count", "laplace", 1.0)]
PID = privacy_unit("pid")


def _ledger(url: str) -> Ledger:
    ledger = Ledger.from_url(url)
    ledger.set_budget("people", epsilon=3.0, delta=1e-3, per_period=True)
    return ledger


@pytest.mark.parametrize(("first", "then"), [(PID, ROWS), (ROWS, PID), (PID, "subjects:id")])
def test_a_release_counting_another_unit_is_refused(ledger_url: str, first: str, then: str) -> None:
    """A dataset whose first release counted ``first`` refuses one counting ``then``, naming
    both units and the fix, with no row appended."""
    ledger = _ledger(ledger_url)
    ledger.reserve("people", "sep", PLAN, period="2026-09", unit=first)
    ledger.charge("sep", "count")
    rows = len(ledger.rows())
    with pytest.raises(
        UnitMismatchError,
        match=r"dataset 'people' counts .*release 'sep'.* but this release counts .*"
        r"--dataset NEW.*Nothing was read or charged",
    ):
        ledger.reserve("people", "oct", PLAN, period="2026-10", unit=then)
    assert len(ledger.rows()) == rows
    assert ledger.privacy_unit("people") == (first, "sep")


def test_the_same_unit_is_one_whatever_the_column_spelling(ledger_url: str) -> None:
    """Subject ids are matched trimmed and case-insensitively: `` PID`` is the unit of ``pid``;
    a resumed release reserves again with its own unit."""
    ledger = _ledger(ledger_url)
    ledger.reserve("people", "sep", PLAN, period="2026-09", unit=PID)
    ledger.reserve("people", "oct", PLAN, period="2026-10", unit=privacy_unit(" PID"))
    again = ledger.reserve("people", "oct", PLAN, period="2026-10", unit=PID)
    assert again.unit == PID and privacy_unit(" PID") == PID


def test_a_cancelled_release_that_spent_nothing_fixes_no_unit(ledger_url: str) -> None:
    """A release refused after its reservation with nothing charged (cancelled) is no spend: the
    next release sets the dataset's unit. One that charged a stage and was cancelled does."""
    ledger = _ledger(ledger_url)
    ledger.reserve("people", "empty", PLAN, period="2026-09", unit=ROWS)
    ledger.cancel("empty")
    assert ledger.privacy_unit("people") is None
    ledger.reserve("people", "sep", PLAN, period="2026-09", unit=PID)
    ledger.charge("sep", "count")
    ledger.cancel("sep")
    with pytest.raises(UnitMismatchError, match="counts subjects \\(subject_id = 'pid'\\)"):
        ledger.reserve("people", "oct", PLAN, period="2026-10", unit=ROWS)


def test_reservations_recorded_before_units_fix_none(tmp_path: Path) -> None:
    """A ledger written before units (reserve rows without one) takes the first recorded unit;
    a caller that gives no unit is not checked."""
    ledger = _ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")

    planned = [{"stage": "count", "mechanism": "laplace", "epsilon": 1.0}]
    old = {"kind": "reserve", "dataset": "people", "release_id": "old", "epsilon": "1.0",
           "delta": "0", "detail": {"planned": planned, "period": "2026-08"}}  # fmt: skip
    ledger._write(lambda conn: append_row(conn, ledger.url, old))
    assert getattr(ledger.reservation("old"), "unit", "missing") is None
    ledger.reserve("people", "sep", PLAN, period="2026-09", unit=ROWS)
    ledger.reserve("people", "oct", PLAN, period="2026-10")
    assert ledger.privacy_unit("people") == (ROWS, "sep")
    assert json.loads(ledger.rows()[-1]["detail"]).get("unit") is None
