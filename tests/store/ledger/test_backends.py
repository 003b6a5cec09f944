"""Ledger URLs: resolution order, clear refusals that never echo a password, redaction (the
PostgreSQL backend and `sds ledger migrate` are tests/e2e/test_ledger_postgres.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sds_core.errors import SdsInputError
from sds_release.store.ledger.backends import (
    default_ledger_url,
    open_store,
    redact_url,
    resolve_ledger_url,
    sqlite_path,
)


def test_url_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--ledger/config wins over SDS_LEDGER_URL, which wins over the home's SQLite file."""
    monkeypatch.delenv("SDS_LEDGER_URL", raising=False)
    assert resolve_ledger_url(tmp_path) == f"sqlite:///{tmp_path}/ledger.sqlite"
    monkeypatch.setenv("SDS_LEDGER_URL", "postgresql://env@/db")
    assert resolve_ledger_url(tmp_path) == "postgresql://env@/db"
    assert resolve_ledger_url(tmp_path, "postgresql://given@/db") == "postgresql://given@/db"
    assert sqlite_path(default_ledger_url(tmp_path)) == tmp_path / "ledger.sqlite"
    assert sqlite_path("sqlite:///rel/l.sqlite") == Path("rel/l.sqlite")


@pytest.mark.parametrize(
    "url, match",
    [
        ("mysql://u@h/db", "is not supported"),
        ("/srv/ledger.sqlite", "is not supported"),
        ("sqlite://ledger.sqlite", "three slashes"),
        ("postgresql://u:s3cret@/nodb?host=/nonexistent-socket-dir", "cannot open the ledger"),
    ],
)
def test_bad_urls_are_clear_and_never_echo_a_password(url: str, match: str) -> None:
    """Unsupported or unreachable ledger URLs: SdsInputError naming the fix, password hidden."""
    with pytest.raises(SdsInputError, match=match) as info:
        open_store(url, busy_timeout=1)
    assert "s3cret" not in str(info.value)


def test_redact_url() -> None:
    """Only the password is replaced; URLs without one are unchanged."""
    assert redact_url("postgresql://a:b@h:5/d?x=1") == "postgresql://a:***@h:5/d?x=1"
    assert redact_url("postgresql://a@h/d") == "postgresql://a@h/d"


def test_ledger_url_password_is_never_kept(tmp_path: Path) -> None:
    """The private parameters keep the ledger URL without its password; the manifest's
    parameters do not name the ledger; the kept identity of the home ledger is None."""
    from sds_release.store.config.release_params import ReleaseParams
    from sds_release.store.ledger.backends import split_password
    from sds_release.store.run.release_run import ReleaseRun, ledger_identity

    url = "postgresql://sds:s3cret@db.example:5432/ledger?sslmode=require"
    bare = "postgresql://sds@db.example:5432/ledger?sslmode=require"
    assert split_password(url) == (bare, "s3cret")
    params = ReleaseParams(input=str(tmp_path / "in.csv"), dataset="d", ledger=url)
    assert "s3cret" not in json.dumps(params.private_dict())
    public = params.public_dict()
    assert "ledger" not in public and "home" not in public and public["input"] == "in.csv"
    run = ReleaseRun(params, "r1", str(tmp_path))
    assert ledger_identity(run) == bare
    home_run = ReleaseRun(params.model_copy(update={"ledger": None}), "r1", str(tmp_path))
    assert ledger_identity(home_run) is None


def test_a_charge_on_a_full_sqlite_disk_is_absent_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite rolls a transaction back itself on a full disk: the charge is absent, the error is
    "database or disk is full" (not a failed ROLLBACK's), and once there is space it is whole."""
    import sqlite3

    from sds_release.store.ledger.backends import SqliteStore
    from sds_release.store.ledger.book import Ledger
    from sds_release.store.ledger.values import PlannedCharge

    ledger = Ledger.from_url(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    ledger.set_budget("pums", epsilon=1.0, delta=1e-5)
    ledger.reserve("pums", "r1", [PlannedCharge("count", "laplace", 0.1)])
    connect = SqliteStore._connect

    def full(self: SqliteStore) -> sqlite3.Connection:  # no page may be added: SQLITE_FULL
        conn = connect(self)
        conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
        return conn

    monkeypatch.setattr(SqliteStore, "_connect", full)
    with pytest.raises(sqlite3.OperationalError, match="database or disk is full"):
        ledger.charge("r1", "count", detail={"pad": "x" * 20_000})
    monkeypatch.undo()
    assert ledger.charges() == [] and ledger.verify().ok
    ledger.charge("r1", "count", detail={"pad": "x" * 20_000})
    assert [c.stage for c in ledger.charges()] == ["count"] and ledger.verify().ok
