"""The PostgreSQL ledger backend through the library and the CLI, and `sds ledger migrate`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sds_release.store.ledger.book import Ledger, LedgerMovedError
from sds_release.store.ledger.migration import migrate_ledger
from sds_release.store.ledger.values import LedgerConflictError, PlannedCharge
from tests.helpers import PROJECT, run_cli

PLAN = [PlannedCharge("count", "laplace", 0.1), PlannedCharge("k1", "laplace", 0.2)]


def _fill(ledger: Ledger) -> Ledger:
    ledger.set_budget("pums", epsilon=1.0, delta=1e-5)
    ledger.reserve("pums", "r1", PLAN)
    ledger.charge("r1", "count")
    ledger.charge("r1", "k1")
    ledger.complete("r1")
    ledger.reserve("pums", "r2", PLAN)
    ledger.charge("r2", "count")
    return ledger


def test_postgres_rows_hash_like_sqlite(tmp_path: Path, pg_url: str) -> None:
    """The same calls give the same rows on both backends: same columns, same chain rules."""
    lite = _fill(Ledger.from_url(f"sqlite:///{tmp_path}/l.sqlite"))
    pg = _fill(Ledger.from_url(pg_url))
    drop = ("created_at", "prev_hash", "hash")
    strip = [{k: v for k, v in r.items() if k not in drop} for r in lite.rows()]
    assert strip == [{k: v for k, v in r.items() if k not in drop} for r in pg.rows()]
    assert pg.verify().ok and lite.verify().ok
    assert pg.budget("pums") == lite.budget("pums")


# -- migration ----------------------------------------------------------------------------------
def test_migrate_copies_verbatim_and_freezes_source(tmp_path: Path, pg_url: str) -> None:
    """Every row is copied with its hash; the source turns read-only; a re-run copies nothing."""
    source = _fill(Ledger.from_url(f"sqlite:///{tmp_path}/l.sqlite"))
    target = Ledger.from_url(pg_url)
    report = migrate_ledger(source, target)
    assert (report.rows, report.copied) == (7, 7) and target.rows() == source.rows()
    assert target.head() == source.head() and target.verify().ok
    assert source.moved_to() == target.url
    with pytest.raises(LedgerMovedError, match="migrated to"):
        source.charge("r2", "k1")
    assert source.budget("pums") == target.budget("pums")  # reads still answer
    target.charge("r2", "k1")  # the open release goes on in the new ledger
    assert migrate_ledger(source, Ledger.from_url(pg_url)).copied == 0  # re-run: nothing to do
    with pytest.raises(LedgerConflictError, match="not the start"):
        migrate_ledger(_fill(Ledger.from_url(f"sqlite:///{tmp_path}/x.sqlite")), target)


def test_migrate_resumes_after_interruption(tmp_path: Path, pg_url: str) -> None:
    """A target holding the first rows (an interrupted copy) gets only the rest."""
    source = _fill(Ledger.from_url(f"sqlite:///{tmp_path}/l.sqlite"))
    target = Ledger.from_url(pg_url)
    target.extend_chain(source.rows()[:3])
    assert migrate_ledger(source, target).copied == 4 and target.verify().ok


def test_migrate_refuses_a_broken_source(tmp_path: Path, pg_url: str) -> None:
    """A source whose chain does not verify is not copied (nothing lands in the target)."""
    source = _fill(Ledger.from_url(f"sqlite:///{tmp_path}/l.sqlite"))
    with source._store.raw() as conn:  # type: ignore[attr-defined]
        conn.execute("DROP TRIGGER ledger_no_update")
        conn.execute("UPDATE ledger SET epsilon = '0.01' WHERE seq = 3")
        conn.commit()
    target = Ledger.from_url(pg_url)
    with pytest.raises(RuntimeError, match="integrity check"):
        migrate_ledger(source, target)
    assert target.rows() == [] and source.moved_to() is None


def test_migrate_refuses_writes_meanwhile(tmp_path: Path, pg_url: str) -> None:
    """A row appended between the copy and the freeze stops the freeze; a re-run completes."""
    source = _fill(Ledger.from_url(f"sqlite:///{tmp_path}/l.sqlite"))
    target = Ledger.from_url(pg_url)
    target.extend_chain(source.rows())
    head = source.head()
    source.charge("r2", "k1")
    with pytest.raises(LedgerConflictError, match="written to during the migration"):
        source.mark_moved(target.url, head)
    assert migrate_ledger(source, target).copied == 1 and source.moved_to() == target.url


# -- the CLI on PostgreSQL ----------------------------------------------------------------------
def test_cli_budget_and_audit_on_postgres(home: Path, pg_url: str) -> None:
    """budget set/show and audit --verify work against --ledger and SDS_LEDGER_URL alike."""
    code, out, err = run_cli(
        "budget", "set", "census", "--epsilon", "3", "--home", str(home), "--ledger", pg_url
    )
    assert code == 0, err
    assert not (home / "ledger.sqlite").exists()  # nothing went to the home's SQLite file
    os.environ["SDS_LEDGER_URL"] = pg_url
    try:
        code, out, _ = run_cli("budget", "show", "census", "--json", "--home", str(home))
        assert code == 0 and json.loads(out)[0]["epsilon_lifetime"] == 3
        code, out, _ = run_cli("audit", "--verify", "--json", "--home", str(home))
        assert code == 0 and json.loads(out)["ledger"]["rows"] == 1
    finally:
        del os.environ["SDS_LEDGER_URL"]
    code, _, err = run_cli(
        "budget", "show", "--home", str(home), "--ledger", "postgresql://x@/y?host=/nowhere"
    )
    assert code == 2 and "cannot open the ledger" in err


def test_cli_cancel_on_postgres(home: Path, pg_url: str) -> None:
    """`sds cancel --ledger` closes an abandoned reservation in PostgreSQL."""
    ledger = Ledger.from_url(pg_url)
    ledger.set_budget("pums", epsilon=1.0, delta=1e-5)
    ledger.reserve("pums", "abandoned", PLAN)
    ledger.charge("abandoned", "count")
    code, out, err = run_cli("cancel", "abandoned", "--home", str(home), "--ledger", pg_url)
    assert code == 0, err
    assert "spent ε=0.1" in out and ledger.reservation("abandoned").status == "cancelled"


@pytest.mark.slow
def test_release_migrate_then_release_on_postgres(
    tiny_csv: Path, tiny_config: Path, home: Path, pg_url: str, prefect_server: str
) -> None:
    """A release on SQLite, `sds ledger migrate`, audit via PostgreSQL, a 2nd release there."""
    args = ["--config", str(tiny_config), "--home", str(home), "--quiet", "--seed", "3"]
    code, out, err = run_cli("release", str(tiny_csv), *args)
    assert code == 0, err
    code, out, err = run_cli("ledger", "migrate", "--to", pg_url, "--home", str(home), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["audit_ok"] and report["copied"] == report["rows"] > 0
    code, _, err = run_cli("release", str(tiny_csv), *args)  # the old ledger is read-only
    assert code == 1 and "migrated to" in err and "--ledger" in err
    assert len(list(home.glob("releases/*/*"))) == 1  # refused before anything was written
    code, out, err = run_cli("release", str(tiny_csv), *args, "--ledger", pg_url)
    assert code == 0, err
    code, out, _ = run_cli("audit", "--verify", "--json", "--home", str(home), "--ledger", pg_url)
    audit = json.loads(out)
    assert code == 0 and audit["ok"] and len(audit["releases"]) == 2
    assert {r["ledger_status"] for r in audit["releases"]} == {"completed"}


@pytest.mark.slow
def test_resume_on_postgres_via_env(
    tiny_csv: Path, tiny_config: Path, home: Path, pg_url: str, prefect_server: str
) -> None:
    """Killed after charging aggregate-1 with SDS_LEDGER_URL set; resuming against another
    ledger is refused, resuming with the stored URL charges each stage once."""
    rid = "pg-resume"
    env = {
        **os.environ,
        "SDS_TEST_KILL_AT": "aggregate-1",
        "PREFECT_API_URL": prefect_server,
        "SDS_LEDGER_URL": pg_url,
    }
    args = ["release", str(tiny_csv), "--config", str(tiny_config), "--home", str(home)]
    proc = subprocess.run(
        [sys.executable, "-m", "sds_release.flows.cli", *args, "--release-id", rid, "--quiet"],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        timeout=600,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    ledger = Ledger.from_url(pg_url)
    assert [c.stage for c in ledger.charges(release_id=rid)] == ["count", "aggregate-1"]
    other = f"sqlite:///{home}/other.sqlite"
    code, _, err = run_cli("resume", rid, "--home", str(home), "--quiet", "--ledger", other)
    assert code == 1 and "reserved in the ledger" in err and "SDS_LEDGER_URL" in err
    assert not (home / "other.sqlite").exists()  # refused before the other ledger was opened
    code, _, err = run_cli("resume", rid, "--home", str(home), "--quiet")  # stored URL
    assert code == 0, err
    assert [c.stage for c in ledger.charges(release_id=rid)] == [
        "count",
        "aggregate-1",
        "aggregate-2",
    ]
    assert ledger.reservation(rid).status == "completed" and ledger.verify().ok
    assert not (home / "ledger.sqlite").exists()
