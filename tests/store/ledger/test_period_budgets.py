"""Budgets per period (issue #23 point 2): each period of a dataset pays from its own budget,
within an optional lifetime cap across periods; the period is chained in the reserve row; the
budget's kind is fixed by its first spend; the dashboard shows a row and a runway per period."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sqlite3
from pathlib import Path

import pytest

from sds_core.errors import SdsInputError
from sds_release.store.ledger.book import Ledger
from sds_release.store.ledger.budget_view import BudgetView
from sds_release.store.ledger.values import (
    BudgetExceededError,
    LedgerConflictError,
    PeriodMismatchError,
    PlannedCharge,
)
from tests.helpers import run_cli

PLAN = [PlannedCharge("count", "laplace", 1.0), PlannedCharge("aggregate-1", "laplace", 1.0)]


def _release(led: Ledger, release_id: str, period: str | None, epsilon: float = 2.0) -> None:
    """Reserve, charge every stage and complete one release of ``period``."""
    half = epsilon / 2
    plan = [PlannedCharge("count", "laplace", half), PlannedCharge("aggregate-1", "laplace", half)]
    led.reserve("monthly", release_id, plan, period=period)
    for p in plan:
        led.charge(release_id, p.stage)
    led.complete(release_id)


@pytest.fixture
def periodic(ledger_url: str) -> Ledger:
    """A ledger whose dataset 'monthly' has ε = 2, δ = 1e-5 per period and no cap."""
    led = Ledger.from_url(ledger_url)
    led.set_budget("monthly", epsilon=2.0, delta=1e-5, per_period=True)
    return led


def test_each_period_spends_its_full_budget_and_a_spent_period_is_refused(
    periodic: Ledger,
) -> None:
    """Two periods each release with the whole per-period ε; a second release of a spent
    period is refused naming the period and the per-period budget; nothing is reserved."""
    _release(periodic, "sep", "2026-09")
    _release(periodic, "oct", "2026-10")
    with pytest.raises(BudgetExceededError, match=r"period '2026-09'.*per-period budget"):
        periodic.reserve("monthly", "sep-again", PLAN, period="2026-09")
    assert periodic.reservation("sep-again") is None
    status = periodic.budget("monthly")
    assert status is not None and status.per_period
    assert status.epsilon_spent == pytest.approx(4.0)  # both periods together
    assert status.epsilon_remaining == pytest.approx(2.0)  # a period not released yet
    assert [(p.period, p.epsilon_spent, p.epsilon_remaining) for p in status.periods] == [
        ("2026-09", 2.0, 0.0),
        ("2026-10", 2.0, 0.0),
    ]
    sep = periodic.budget("monthly", "2026-09")
    assert sep is not None and sep.period == "2026-09" and sep.epsilon_remaining == 0.0
    new = periodic.budget("monthly", "2026-11")
    assert new is not None and new.epsilon_spent == 0 and new.epsilon_remaining == 2.0
    assert periodic.verify().ok


def test_late_rows_re_release_a_period_from_its_own_budget(periodic: Ledger) -> None:
    """Two releases of one period compose sequentially within that period's budget."""
    _release(periodic, "sep-1", "2026-09", epsilon=1.0)
    _release(periodic, "sep-2", "2026-09", epsilon=1.0)  # the period's late rows
    with pytest.raises(BudgetExceededError, match="period '2026-09'"):
        periodic.reserve(
            "monthly", "sep-3", [PlannedCharge("count", "laplace", 0.5)], period="2026-09"
        )
    _release(periodic, "oct-1", "2026-10", epsilon=2.0)


def test_period_and_budget_kind_must_match(periodic: Ledger, ledger_url: str) -> None:
    """No period on a per-period dataset, or a period on a lifetime one: refused, naming the
    fix; neither writes a row."""
    with pytest.raises(PeriodMismatchError, match=r"per-period budget.*pass --period V"):
        periodic.reserve("monthly", "r1", PLAN)
    periodic.set_budget("lifetime", epsilon=10.0, delta=1e-5)
    with pytest.raises(PeriodMismatchError, match=r"lifetime budget.*--per-period"):
        periodic.reserve("lifetime", "r2", PLAN, period="2026-09")
    with pytest.raises(BudgetExceededError, match=r"no privacy budget.*--per-period"):
        periodic.reserve("nobody", "r3", PLAN, period="2026-09")
    assert periodic.reservations() == []


def test_per_period_is_refused_once_the_lifetime_budget_was_spent(ledger_url: str) -> None:
    """--per-period on a dataset that spent from a lifetime budget is refused (its spend cannot
    be split into periods); before any spend it is allowed; and back is refused too."""
    led = Ledger.from_url(ledger_url)
    led.set_budget("census", epsilon=10.0, delta=1e-5)
    led.set_budget("census", epsilon=4.0, delta=1e-5, per_period=True)  # nothing spent yet
    led.set_budget("census", epsilon=10.0, delta=1e-5)  # and back: still nothing spent
    led.reserve("census", "r1", PLAN)
    rows = len(led.rows())
    with pytest.raises(SdsInputError, match=r"already spent.*cannot\s+be split into periods"):
        led.set_budget("census", epsilon=4.0, delta=1e-5, per_period=True)
    assert len(led.rows()) == rows
    led.set_budget("monthly", epsilon=2.0, delta=1e-5, per_period=True)
    _release(led, "sep", "2026-09")
    with pytest.raises(SdsInputError, match="pass --per-period to change"):
        led.set_budget("monthly", epsilon=10.0, delta=1e-5)


def test_lifetime_cap_bounds_the_periods_together(ledger_url: str) -> None:
    """--lifetime-epsilon caps the sum of every period's ε; the refusal names the cap; the cap
    is kept when a later budget set does not give it."""
    led = Ledger.from_url(ledger_url)
    led.set_budget("monthly", epsilon=2.0, delta=1e-5, per_period=True, lifetime_epsilon=5.0)
    _release(led, "sep", "2026-09")
    _release(led, "oct", "2026-10")
    with pytest.raises(BudgetExceededError, match=r"epsilon=1\.0 left of its lifetime cap"):
        led.reserve("monthly", "nov", PLAN, period="2026-11")
    status = led.set_budget("monthly", epsilon=3.0, delta=1e-5, per_period=True)
    assert status.lifetime_epsilon == 5.0 and status.epsilon_cap_remaining == pytest.approx(1.0)
    assert status.epsilon_remaining == pytest.approx(1.0)  # a new period: the cap binds
    assert status.periods_left(1.0) == 1 and status.releases_left(1.0) == 1
    _release(led, "nov", "2026-11", epsilon=1.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"lifetime_epsilon": 5.0}, "add --per-period"),
        ({"per_period": True, "lifetime_epsilon": 1.0}, "below the per-period budget"),
    ],
)
def test_bad_caps_are_refused(tmp_path: Path, kwargs: dict, match: str) -> None:
    """A cap without --per-period, or below the per-period ε, is refused before any write."""
    led = Ledger.from_url(f"sqlite:///{tmp_path / 'l.sqlite'}")
    with pytest.raises(SdsInputError, match=match):
        led.set_budget("monthly", epsilon=2.0, delta=1e-5, **kwargs)
    assert led.budget("monthly") is None


def test_budgets_cannot_drop_below_what_periods_used(periodic: Ledger) -> None:
    """The per-period budget may not go below one period's use, nor the cap below all."""
    _release(periodic, "sep", "2026-09")
    _release(periodic, "oct", "2026-10")
    with pytest.raises(SdsInputError, match=r"period '2026-09' has already spent"):
        periodic.set_budget("monthly", epsilon=1.0, delta=1e-5, per_period=True)
    with pytest.raises(SdsInputError, match=r"together they have already spent.*epsilon=4"):
        periodic.set_budget(
            "monthly", epsilon=2.0, delta=1e-5, per_period=True, lifetime_epsilon=3.0
        )


def test_a_resumed_release_must_keep_its_period(periodic: Ledger) -> None:
    """The same release id reserved again with another period is a conflict (resume keeps
    the period); with the same one it is the same reservation."""
    first = periodic.reserve("monthly", "r1", PLAN, period="2026-09")
    assert periodic.reserve("monthly", "r1", PLAN, period="2026-09") == first
    with pytest.raises(LedgerConflictError, match="another dataset, plan, period"):
        periodic.reserve("monthly", "r1", PLAN, period="2026-10")


def test_the_period_and_the_budget_kind_are_in_the_hash_chain(tmp_path: Path) -> None:
    """Editing a reserve row's period (or a budget row's per-period flag) breaks `verify`."""
    path = tmp_path / "l.sqlite"
    led = Ledger.from_url(f"sqlite:///{path}")
    led.set_budget("monthly", epsilon=2.0, delta=1e-5, per_period=True, lifetime_epsilon=4.0)
    led.reserve("monthly", "r1", PLAN, period="2026-09")
    assert led.verify().ok
    budget_detail = json.loads(led.rows()[0]["detail"])
    assert budget_detail == {
        "per_period": True,
        "lifetime_epsilon": "4.0",
        "period_format": "YYYY-MM",
    }
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER ledger_no_update")
        row = conn.execute("SELECT seq, detail FROM ledger WHERE kind = 'reserve'").fetchone()
        detail = json.loads(row[1])
        assert detail["period"] == "2026-09"
        detail["period"] = "2026-10"
        conn.execute("UPDATE ledger SET detail = ? WHERE seq = ?", (json.dumps(detail), row[0]))
    assert not Ledger.from_url(f"sqlite:///{path}").verify().ok


def test_dashboard_has_a_row_and_a_runway_per_period(periodic: Ledger) -> None:
    """The budget artifact's rows: the per-period budget, totals, one row per period with what
    it has left and its runway, the runway of a new period; the payload carries the periods."""
    periodic.set_budget("monthly", epsilon=4.0, delta=1e-5, per_period=True, lifetime_epsilon=10)
    _release(periodic, "sep", "2026-09", epsilon=1.0)
    _release(periodic, "oct", "2026-10", epsilon=2.0)
    view = BudgetView.load(periodic, "monthly")
    assert view is not None
    by = {r["entry"]: r for r in view.rows()}
    assert by["per period"]["ε"] == "4" and by["lifetime cap"]["ε"] == "10"
    assert by["spent"]["ε"] == "3"
    assert "left: ε 3, δ 1e-05" in by["period 2026-09"]["status"]
    assert "3 more release(s)" in by["period 2026-09"]["status"]  # 3 more of its ε = 1
    assert "1 more release(s)" in by["period 2026-10"]["status"]  # 1 more of its ε = 2
    assert by["runway"]["status"].startswith("2 more release(s)")  # a new period, ε 2 each
    assert "the lifetime cap pays for 3" in by["runway"]["status"]  # (10 - 3) / 2
    assert "release sep (period 2026-09)" in by
    assert view.remaining_share == pytest.approx(0.7)
    payload = view.payload()
    assert [(p["period"], p["releases_left"]) for p in payload["periods"]] == [
        ("2026-09", 3),
        ("2026-10", 1),
    ]
    assert payload["periods_left"] == 3
    json.dumps(payload)  # the event payload is JSON
    assert "per period" in view.description()
    rows = view.period_rows()
    assert [r[1] for r in rows] == ["*", "2026-09", "2026-10"]


def test_budget_cli_per_period_and_show(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`sds budget set --per-period --lifetime-epsilon` and `budget show` (table and --json)."""
    monkeypatch.setenv("COLUMNS", "200")  # rich: a table as wide as a real terminal's
    home = str(tmp_path)
    code, out, err = run_cli(
        "budget", "set", "monthly", "--epsilon", "2", "--per-period",
        "--lifetime-epsilon", "12", "--home", home,
    )  # fmt: skip
    assert code == 0, err
    assert "per period ε=2" in out and "lifetime cap ε=12" in out
    led = Ledger.open(tmp_path)
    _release(led, "sep", "2026-09")
    code, out, _ = run_cli("budget", "show", "monthly", "--json", "--home", home)
    [row] = json.loads(out)
    assert row["per_period"] and row["lifetime_epsilon"] == 12
    assert row["periods"][0]["period"] == "2026-09" and row["periods"][0]["releases_left"] == 0
    code, out, _ = run_cli("budget", "show", "--home", home)
    assert code == 0 and "2026-09" in out and "per period" in out
    code, _, err = run_cli("budget", "set", "monthly", "--epsilon", "2", "--home", home)
    assert code == 2 and "pass --per-period" in err


def _race(url: str, i: int, barrier: mp.Barrier, out: mp.Queue) -> None:
    """Reserve ε 0.3 in period 2026-09 (even i) or 2026-10 (odd i)."""
    period = "2026-09" if i % 2 == 0 else "2026-10"
    barrier.wait()
    try:
        Ledger.from_url(url).reserve(
            "monthly", f"r{i}", [PlannedCharge("count", "laplace", 0.3)], period=period
        )
        out.put(("ok", period))
    except BudgetExceededError:
        out.put(("refused", period))
    out.close()
    out.join_thread()


@pytest.mark.skipif(os.name != "posix", reason="uses fork")
def test_concurrent_reservations_respect_each_period(ledger_url: str) -> None:
    """8 processes, 4 per period, race to reserve 0.3 against 1.0 per period: exactly 3 succeed
    in each period."""
    led = Ledger.from_url(ledger_url)
    led.set_budget("monthly", epsilon=1.0, delta=1e-5, per_period=True)
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(8), ctx.Queue()
    procs = [ctx.Process(target=_child, args=(ledger_url, i, barrier, out)) for i in range(8)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert results.count(("ok", "2026-09")) == 3 and results.count(("ok", "2026-10")) == 3
    assert led.verify().ok


def _child(url: str, i: int, barrier: mp.Barrier, out: mp.Queue) -> None:
    """The race in a forked child that leaves with ``os._exit`` (no inherited atexit)."""
    code = 0
    try:
        _race(url, i, barrier, out)
    except BaseException:
        code = 1
    os._exit(code)
