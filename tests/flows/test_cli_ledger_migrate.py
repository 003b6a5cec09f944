"""``sds ledger migrate``'s refusals through the CLI (SQLite to SQLite, no server): each exits 2
with one message naming the problem, copies nothing and leaves the source writable; the
PostgreSQL migrations are tests/e2e/test_ledger_postgres.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from sds_release.store.ledger.book import Ledger
from sds_release.store.ledger.values import PlannedCharge
from tests.helpers import run_cli

PLAN = [PlannedCharge("count", "laplace", 0.1), PlannedCharge("k1", "laplace", 0.2)]


@pytest.fixture
def source(home: Path) -> Ledger:
    """The home's SQLite ledger with a budget, a completed and an open release (5 rows)."""
    ledger = Ledger.open(home)
    ledger.set_budget("pums", epsilon=1.0, delta=1e-5)
    ledger.reserve("pums", "r1", PLAN)
    ledger.charge("r1", "count")
    ledger.complete("r1")
    ledger.reserve("pums", "r2", PLAN)
    return ledger


def _still_writable(ledger: Ledger, home: Path) -> None:
    """The refused migration left the source as it was: not moved, verifiable, writable."""
    assert ledger.moved_to() is None and ledger.verify().ok
    code, _, err = run_cli("budget", "set", "pums", "--epsilon", "2", "--home", str(home))
    assert code == 0, err


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("mysql://u@h/db", "ledger URL 'mysql://u@h/db' is not supported: use sqlite:///PATH"),
        ("sqlite://l.sqlite", "three slashes"),
        (
            "postgresql://u:s3cret@/nodb?host=/nonexistent-socket-dir",
            "cannot open the ledger postgresql://u:***@/nodb",
        ),
    ],
    ids=["unsupported", "malformed", "unreachable"],
)
def test_bad_target_url_exits_2_and_copies_nothing(
    target: str, message: str, source: Ledger, home: Path
) -> None:
    """An unsupported, malformed or unreachable target: exit 2, the message, no password."""
    code, out, err = run_cli("ledger", "migrate", "--to", target, "--home", str(home))
    assert (code, out) == (2, "")
    assert err.startswith("sds: error: ") and message in err and "s3cret" not in err
    _still_writable(source, home)


def test_target_that_is_not_empty_exits_2(source: Ledger, home: Path, tmp_path: Path) -> None:
    """A target holding another ledger's rows: exit 2 ("migrate into an empty database"), the
    target keeps its one row."""
    url = f"sqlite:///{tmp_path / 'other.sqlite'}"
    other = Ledger.from_url(url)
    other.set_budget("x", epsilon=2.0, delta=1e-5)
    code, out, err = run_cli("ledger", "migrate", "--to", url, "--home", str(home))
    assert (code, out) == (2, "")
    assert "already holds 1 rows that are not the start of the ledger" in err
    assert "migrate into an empty database" in err
    assert len(other.rows()) == 1
    _still_writable(source, home)


def test_target_that_is_the_source_exits_2(source: Ledger, home: Path) -> None:
    """The source's own URL as the target: exit 2, nothing changes."""
    url = f"sqlite:///{home.resolve() / 'ledger.sqlite'}"
    code, out, err = run_cli("ledger", "migrate", "--to", url, "--home", str(home))
    assert (code, out) == (2, "") and "cannot be migrated onto itself" in err
    assert len(source.rows()) == 5
    _still_writable(source, home)


def test_broken_source_exits_2_and_target_stays_empty(
    source: Ledger, home: Path, tmp_path: Path
) -> None:
    """A source whose hash chain does not verify is not copied: exit 2, empty target."""
    with source._store.raw() as conn:  # type: ignore[attr-defined]
        conn.execute("DROP TRIGGER ledger_no_update")
        conn.execute("UPDATE ledger SET epsilon = '0.01' WHERE seq = 3")
        conn.commit()
    url = f"sqlite:///{tmp_path / 'new.sqlite'}"
    code, out, err = run_cli("ledger", "migrate", "--to", url, "--home", str(home))
    assert (code, out) == (2, "") and "integrity check" in err
    assert Ledger.from_url(url).rows() == [] and source.moved_to() is None


def test_migrated_source_refuses_a_second_target(
    source: Ledger, home: Path, tmp_path: Path
) -> None:
    """After one migration, migrating again elsewhere exits 2 naming where the ledger went,
    and the home's commands name the --ledger to use."""
    first = f"sqlite:///{tmp_path / 'first.sqlite'}"
    code, out, err = run_cli("ledger", "migrate", "--to", first, "--home", str(home))
    assert code == 0 and "copied 5 of 5 rows" in out and "audit --verify: ok" in out, err
    second = f"sqlite:///{tmp_path / 'second.sqlite'}"
    code, out, err = run_cli("ledger", "migrate", "--to", second, "--home", str(home))
    assert (code, out) == (2, "") and f"was already migrated to {first}" in err
    assert not (tmp_path / "second.sqlite").exists() or Ledger.from_url(second).rows() == []
    code, _, err = run_cli("budget", "set", "pums", "--epsilon", "2", "--home", str(home))
    assert code == 2 and f"use --ledger {first}" in err
