"""The audit trail from the ledger and the run journal: each release's spend and the budget left
before and after it (at the budget set at the time), a held reservation, a refusal that spent
nothing, a resumed release, and totals equal to what `sds budget show` prints."""

from __future__ import annotations

from pathlib import Path

import pytest

from sds_release.store.audit.journal import RunOrigin, note_refusal, note_start
from sds_release.store.audit.page import audit_page_html
from sds_release.store.audit.trail import audit_trail
from sds_release.store.ledger.book import Ledger
from sds_release.store.ledger.budget_view import BudgetView
from sds_release.store.ledger.values import PlannedCharge

PLAN = [PlannedCharge("count", "laplace", 1.0), PlannedCharge("k1", "laplace", 2.0)]
CLI = RunOrigin("cli", user="ann@box")


@pytest.fixture
def trail_home(home: Path) -> Path:
    """Dataset d, lifetime ε 10 then raised to 20: r1 (ε 3, complete), r2 (ε 3, one stage
    charged, still open, run twice), r3 refused; the journal records who started each."""
    home.mkdir()
    ledger = Ledger.open(home)
    ledger.set_budget("d", epsilon=10.0, delta=1e-3)
    ledger.reserve("d", "r1", PLAN, delta=1e-5)
    note_start(home, "r1", "d", None, CLI)
    for stage in ("count", "k1"):
        ledger.charge("r1", stage)
    ledger.complete("r1")
    ledger.set_budget("d", epsilon=20.0, delta=1e-3)
    ledger.reserve("d", "r2", PLAN, delta=1e-5)
    note_start(home, "r2", "d", None, CLI)
    ledger.charge("r2", "count")
    note_start(home, "r2", "d", None, RunOrigin("on-demand", deployment="on-demand-d"))
    note_refusal(home, "r3", "d", None, CLI, epsilon=30.0, delta=1e-5, reason="not enough")
    return home


def test_each_release_spends_from_the_budget_of_its_time(trail_home: Path) -> None:
    """r1: 10 -> 7 (the budget then was 10); r2: 17 -> 14 (raised to 20; holds its ε 3);
    r3: refused, spent 0, 14 -> 14; r2 was run twice: resumed."""
    trail = audit_trail(trail_home, now="2026-12-01T00:00:00+00:00")
    got = {
        t.release_id: (t.state, t.runs, t.epsilon_spent, t.held, t.epsilon_before, t.epsilon_after)
        for t in trail.entries
    }
    assert got == {
        "r1": ("no directory", 1, 3.0, False, 10.0, 7.0),
        "r2": ("no directory", 2, 1.0, True, 17.0, 14.0),
        "r3": ("refused", 1, 0.0, False, 14.0, 14.0),
    }
    by_id = {t.release_id: t for t in trail.entries}
    assert by_id["r2"].resumed and by_id["r2"].state_text == "resumed, no directory"
    assert by_id["r2"].later_runs[0].startswith("deployment on-demand-d, run on demand")
    assert by_id["r1"].origin == "command line (ann@box)" and by_id["r3"].reason == "not enough"
    assert trail.ledger_ok is True


def test_the_totals_are_the_budget_shows(trail_home: Path) -> None:
    """The page's budget rows are `sds budget show`'s; its releases add up to the ledger's spent
    plus reserved; the page says they are equal."""
    trail = audit_trail(trail_home)
    [totals] = trail.datasets
    view = BudgetView.load(Ledger.open(trail_home), "d")
    assert view is not None and list(totals.rows) == view.period_rows()
    assert totals.entries_epsilon == totals.epsilon_spent + totals.epsilon_reserved == 6.0
    page = audit_page_html(trail)
    assert "<span class='ok'>equal</span>" in page and "PRIVATE" in page
    assert page.count("<tr class='release'") == 3


def test_a_failed_release_reads_failed(trail_home: Path) -> None:
    """A release whose manifest is failed (its reservation kept open to resume) is listed as
    failed, holding what it reserved."""
    import json

    from sds_release.store.workspace.home import release_paths

    ledger = Ledger.open(trail_home)
    ledger.reserve("d", "r4", PLAN, delta=1e-5)
    ledger.charge("r4", "count")
    paths = release_paths(trail_home, "d", "r4")
    paths.create()
    paths.manifest.write_text(json.dumps({"release_id": "r4", "dataset": "d", "status": "failed"}))
    entry = next(t for t in audit_trail(trail_home).entries if t.release_id == "r4")
    assert (entry.state, entry.held, entry.epsilon_spent) == ("failed", True, 1.0)
