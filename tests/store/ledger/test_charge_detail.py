"""A charge can record a detail (aggregate-1: where the release's δ goes, issue #27 point 7): in
the hash chain, on both backends, copied by a migration; charges without one read as before."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sds_release.store.ledger.book import Ledger
from sds_release.store.ledger.migration import migrate_ledger
from sds_release.store.ledger.values import PlannedCharge

PLAN = [
    PlannedCharge("count", "discrete-laplace", 0.02),
    PlannedCharge("aggregate-1", "zcdp-gaussian+percentile", 1.98, 6e-7, 0.05),
]
DETAIL = {
    "effective_delta": 1e-6,
    "delta_parts": {"zcdp": 5e-7, "one_tuple_threshold": 4.999e-7, "noise_sampler": 1e-13},
}


def _ledger(url: str) -> Ledger:
    led = Ledger.from_url(url)
    led.set_budget("pums", epsilon=10, delta=1e-4)
    led.reserve("pums", "r1", PLAN, epsilon=2.0, delta=6e-7)
    led.charge("r1", "count")
    led.charge("r1", "aggregate-1", detail=DETAIL)
    return led


def test_a_charge_records_its_detail_in_the_chain(ledger_url: str) -> None:
    """The detail is read back, a repeated charge returns the same row, the chain checks."""
    led = _ledger(ledger_url)
    count, agg = led.charges(release_id="r1")
    assert count.detail is None and agg.detail == DETAIL
    assert led.charge("r1", "aggregate-1", detail={"other": 1}).hash == agg.hash  # at most once
    assert led.verify().ok


def test_an_edited_detail_breaks_the_chain(tmp_path: Path) -> None:
    """Rewriting the recorded detail (triggers dropped) is found by the chain check."""
    path = tmp_path / "ledger.sqlite"
    _ledger(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'")]
        for name in names:
            conn.execute(f"DROP TRIGGER {name}")
        conn.execute("UPDATE ledger SET detail = '{}' WHERE stage = 'aggregate-1'")
    report = Ledger.from_url(f"sqlite:///{path}").verify()
    assert not report.ok and report.broken_seqs


def test_a_migration_copies_the_detail(tmp_path: Path, pg_url: str) -> None:
    """SQLite to PostgreSQL: the charge and its detail arrive with the same hash."""
    source = _ledger(f"sqlite:///{tmp_path / 'l.sqlite'}")
    target = Ledger.from_url(pg_url)
    migrate_ledger(source, target)
    assert target.charges() == source.charges() and target.verify().ok
    assert target.charges(release_id="r1")[1].detail == DETAIL
