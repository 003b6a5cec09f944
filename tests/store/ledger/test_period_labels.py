"""Period labels (sds_release.store.ledger.periods, issue #37 point 1): one spelling per period. The
ledger records the dataset's period format with its per-period budget, refuses a reservation
whose period is not written in it, and `sds audit --verify` reports a label an older version
let in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sds_core.errors import SdsInputError
from sds_release.store.audit.home import audit_home
from sds_release.store.ledger.book import Ledger
from sds_release.store.ledger.chain import append_row
from sds_release.store.ledger.periods import PERIOD_FORMATS, label_problem, period_key
from sds_release.store.ledger.values import PeriodMismatchError, PlannedCharge
from tests.helpers import run_cli

PLAN = [PlannedCharge("count", "laplace", 1.0)]


@pytest.mark.parametrize(
    ("label", "fmt", "key"),
    [
        ("2026-10", "YYYY-MM", 202610),
        ("2026-Q4", "YYYY-Qn", 20264),
        ("2026", "YYYY", 2026),
        ("2024-02-29", "YYYY-MM-DD", 20240229),
        ("2026-10 ", "YYYY-MM", None),
        (" 2026-10", "YYYY-MM", None),
        ("2026-10\n", "YYYY-MM", None),
        ("2026-1", "YYYY-MM", None),
        ("2026-13", "YYYY-MM", None),
        ("2026/10", "YYYY-MM", None),
        ("202610", "YYYY-MM", None),
        ("2026-q4", "YYYY-Qn", None),
        ("2026-Q5", "YYYY-Qn", None),
        ("2025-02-29", "YYYY-MM-DD", None),
        ("\uff12\uff10\uff12\uff16-10", "YYYY-MM", None),  # full-width digits match \d
        ("0000", "YYYY", None),
    ],
)
def test_a_label_is_a_period_only_in_its_canonical_text(label: str, fmt: str, key: object) -> None:
    """Each format has one text per period: spaces, missing zeros, other separators, other
    digits and impossible months or days are not periods."""
    assert period_key(label, fmt) == key
    assert (label_problem(label, fmt) is None) == (key is not None)


def test_the_formats_name_disjoint_labels() -> None:
    """No label is a period of two formats, so a label alone says which format it is in."""
    for example in ("2026-10", "2026-Q4", "2026", "2026-10-31"):
        assert sum(period_key(example, f) is not None for f in PERIOD_FORMATS) == 1


@pytest.mark.parametrize("label", ["2026-10 ", " 2026-10", "2026-1", "2026-10-01"])
def test_a_label_not_in_the_dataset_format_is_refused_at_reserve(
    ledger_url: str, label: str
) -> None:
    """A reservation under another spelling of a period is refused, naming the label and the
    format, and nothing is reserved: the period's budget has one key."""
    led = Ledger.from_url(ledger_url)
    led.set_budget("monthly", epsilon=4.0, delta=1e-5, per_period=True)
    led.reserve("monthly", "oct", PLAN, period="2026-10")
    with pytest.raises(PeriodMismatchError, match=rf"period {label!r} .*records its periods as"):
        led.reserve("monthly", "again", PLAN, period=label)
    assert led.reservation("again") is None
    assert [p.period for p in led.budget("monthly").periods] == ["2026-10"]  # type: ignore[union-attr]


def test_the_format_is_recorded_with_the_budget_and_kept(ledger_url: str) -> None:
    """--period-format is recorded in the chained budget row and kept by a later budget set;
    the reservation must be written in it; unknown formats and a format without --per-period
    are refused."""
    led = Ledger.from_url(ledger_url)
    led.set_budget("quarterly", epsilon=4.0, delta=1e-5, per_period=True, period_format="YYYY-Qn")
    led.set_budget("quarterly", epsilon=5.0, delta=1e-5, per_period=True)  # format kept
    assert led.period_format("quarterly") == "YYYY-Qn"
    assert json.loads(led.rows()[-1]["detail"])["period_format"] == "YYYY-Qn"
    with pytest.raises(PeriodMismatchError, match=r"'2026-10' is not a period written YYYY-Qn"):
        led.reserve("quarterly", "r1", PLAN, period="2026-10")
    led.reserve("quarterly", "r2", PLAN, period="2026-Q4")
    with pytest.raises(SdsInputError, match=r"'YYYYMM' is not a period format"):
        led.set_budget("x", epsilon=1.0, delta=1e-5, per_period=True, period_format="YYYYMM")
    with pytest.raises(SdsInputError, match="add --per-period"):
        led.set_budget("x", epsilon=1.0, delta=1e-5, period_format="YYYY")
    led.set_budget("life", epsilon=1.0, delta=1e-5)
    assert led.period_format("life") is None and led.period_format("nobody") is None


def test_the_format_cannot_change_once_a_period_is_written_in_it(ledger_url: str) -> None:
    """Changing the format is refused once a period is reserved in the old one (its budget
    would have two keys); before any reservation it is allowed."""
    led = Ledger.from_url(ledger_url)
    led.set_budget("monthly", epsilon=4.0, delta=1e-5, per_period=True)
    led.set_budget("monthly", epsilon=4.0, delta=1e-5, per_period=True, period_format="YYYY")
    led.set_budget("monthly", epsilon=4.0, delta=1e-5, per_period=True, period_format="YYYY-MM")
    led.reserve("monthly", "oct", PLAN, period="2026-10")
    with pytest.raises(SdsInputError, match=r"already reserved period\(s\) \['2026-10'\]"):
        led.set_budget("monthly", epsilon=4.0, delta=1e-5, per_period=True, period_format="YYYY")
    assert led.period_format("monthly") == "YYYY-MM"


def test_audit_verify_reports_a_label_an_older_version_let_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ledger whose reserve rows hold '2026-10' and '2026-10 ' (written before labels were
    checked, as issue #37 reproduced): `sds audit --verify` names the dataset and the label,
    and the canonical one is no problem."""
    home = tmp_path / "home"
    home.mkdir()
    led = Ledger.open(home)
    led.set_budget("monthly", epsilon=4.0, delta=1e-5, per_period=True)
    led.reserve("monthly", "oct", PLAN, period="2026-10")
    led._write(  # what reserve wrote before it checked labels
        lambda conn: append_row(
            conn,
            led.url,
            {
                "kind": "reserve",
                "dataset": "monthly",
                "release_id": "oct-space",
                "epsilon": "1.0",
                "delta": "0",
                "detail": {"planned": [{"stage": "count", "mechanism": "laplace",
                                        "epsilon": 1.0, "delta": 0.0}],
                           "period": "2026-10 "},
            },
        )
    )  # fmt: skip
    report = audit_home(home, verify=True)
    [problem] = report.problems
    assert "dataset 'monthly'" in problem and "period label '2026-10 '" in problem
    monkeypatch.setenv("COLUMNS", "250")
    code, out, _ = run_cli("audit", "--verify", "--home", str(home))
    assert code == 1 and "period label '2026-10 '" in out
