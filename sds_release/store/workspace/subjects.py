"""The private record of which period each subject counts in (a periodic dataset with a subject id).

``$SDS_HOME/private/_periods/<dataset>/``: a per-dataset secret (``secret.key``, 32 random bytes,
0600) and ``subjects.sqlite`` (0600), one row per subject ever released: the subject's keyed hash
HMAC-SHA256(secret, subject id) and the period it counts in. A subject counts in the first period
it is released in; its rows in any other period are left out of that period's releases
(parallel composition per subject, docs/privacy.md). No subject id is stored in clear. Written by
the ingest task of a release (``sds_release.store.inputs.periods``), before anything is charged.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import sqlite3
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from sds_core.data.text import match_key
from sds_core.errors import SdsInputError

__all__ = ["SECRET_FILE", "SUBJECTS_FILE", "SubjectRecord"]

SECRET_FILE = "secret.key"
SUBJECTS_FILE = "subjects.sqlite"
_BUSY_TIMEOUT_S = 60.0
_SCHEMA = """
CREATE TABLE IF NOT EXISTS subjects (
    key BLOB PRIMARY KEY,      -- HMAC-SHA256(secret, subject id): never the id itself
    period TEXT NOT NULL,      -- the one period the subject counts in
    release_id TEXT NOT NULL,  -- the release that assigned it
    assigned_at TEXT NOT NULL
) WITHOUT ROWID
"""


class SubjectRecord:
    """Which period each subject of one dataset counts in, as keyed hashes in the private
    workspace of ``home``.

    The primary key on the hash makes "one period per subject" a rule of the database: the
    first release that assigns a subject wins, in one ``BEGIN IMMEDIATE`` transaction, so two
    periods released at once cannot both count the same subject.
    """

    def __init__(self, home: str | Path, dataset: str) -> None:
        """The record of ``dataset`` in ``home`` (nothing is created until it is written)."""
        self.dir = Path(home) / "private" / "_periods" / dataset

    @property
    def path(self) -> Path:
        """The SQLite file of the record."""
        return self.dir / SUBJECTS_FILE

    def exists(self) -> bool:
        """Whether any subject of the dataset was ever assigned here."""
        return self.path.is_file()

    # -- writing: a release's ingest ----------------------------------------------------------
    def assign(self, period: str, release_id: str, subjects: Iterable[str]) -> set[str]:
        """Count every subject not yet assigned in ``period``; return the subjects (as given)
        that already count in another period, whose rows the release must leave out.

        Idempotent: a resumed release (or a later release of the same period) finds its own
        subjects assigned to ``period`` and gets the same answer.
        """
        keyed = self._keyed(subjects, create=True)
        conn = self._connect(create=True)
        try:
            conn.execute("BEGIN IMMEDIATE")
            elsewhere = self._elsewhere(conn, period, keyed)
            now = datetime.now(UTC).isoformat(timespec="seconds")
            conn.executemany(
                "INSERT OR IGNORE INTO subjects (key, period, release_id, assigned_at) "
                "VALUES (?, ?, ?, ?)",
                ((key, period, release_id, now) for key in keyed),
            )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            conn.close()
        return elsewhere

    # -- reading: a replay, the tests ---------------------------------------------------------
    def counted_elsewhere(self, period: str, subjects: Iterable[str]) -> set[str]:
        """The subjects (as given) that count in a period other than ``period``; read-only
        (``sds audit --replay`` leaves out what the release left out)."""
        if not self.exists():
            return set()
        keyed = self._keyed(subjects, create=False)
        conn = self._connect(create=False)
        try:
            return self._elsewhere(conn, period, keyed)
        finally:
            conn.close()

    def period_of(self, subject: str) -> str | None:
        """The period ``subject`` counts in (None: never released)."""
        if not self.exists():
            return None
        conn = self._connect(create=False)
        try:
            row = conn.execute(
                "SELECT period FROM subjects WHERE key = ?", (self.key(subject, create=False),)
            ).fetchone()
        finally:
            conn.close()
        return None if row is None else str(row[0])

    def periods(self) -> dict[str, int]:
        """How many subjects count in each period (private: exact counts of the data)."""
        if not self.exists():
            return {}
        conn = self._connect(create=False)
        try:
            rows = conn.execute("SELECT period, count(*) FROM subjects GROUP BY period")
            return {str(p): int(n) for p, n in rows}
        finally:
            conn.close()

    def key(self, subject: str, *, create: bool = False) -> bytes:
        """HMAC-SHA256 of the subject id as preparation matches it (trimmed, lower-cased)."""
        return hmac.new(
            self._secret(create=create), match_key(subject).encode("utf-8"), hashlib.sha256
        ).digest()

    # -- internals ----------------------------------------------------------------------------
    def _keyed(self, subjects: Iterable[str], *, create: bool) -> dict[bytes, str]:
        secret = self._secret(create=create)
        return {
            hmac.new(secret, match_key(s).encode("utf-8"), hashlib.sha256).digest(): s
            for s in subjects
        }

    @staticmethod
    def _elsewhere(conn: sqlite3.Connection, period: str, keyed: dict[bytes, str]) -> set[str]:
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS batch (key BLOB PRIMARY KEY) WITHOUT ROWID")
        conn.execute("DELETE FROM temp.batch")
        conn.executemany("INSERT OR IGNORE INTO temp.batch VALUES (?)", ((k,) for k in keyed))
        rows = conn.execute(
            "SELECT s.key FROM subjects s JOIN temp.batch b ON s.key = b.key WHERE s.period != ?",
            (period,),
        )
        return {keyed[bytes(r[0])] for r in rows}

    def _private_dir(self) -> None:
        """Create ``private/_periods/<dataset>`` (and the parents this makes) mode 0700."""
        missing = [d for d in (self.dir, *self.dir.parents) if not d.exists()]
        self.dir.mkdir(parents=True, exist_ok=True)
        for d in missing:
            os.chmod(d, 0o700)

    def _secret(self, *, create: bool) -> bytes:
        """The dataset's HMAC key: made once (32 random bytes, 0600), never replaced."""
        path = self.dir / SECRET_FILE
        if not path.is_file():
            if not create:
                raise SdsInputError(
                    f"the subject record of {self.dir.parent.name}/{self.dir.name} has no "
                    f"secret ({path}); it was removed or this is another home: run from the "
                    "home that released the dataset's periods"
                )
            self._private_dir()
            tmp = path.with_name(f".{SECRET_FILE}.{secrets.token_hex(6)}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(32))
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, path)  # atomic, and never replaces a secret made concurrently
            except FileExistsError:
                pass
            finally:
                tmp.unlink()
        data = path.read_bytes()
        if len(data) != 32:
            raise SdsInputError(
                f"the subject record's secret {path} is damaged ({len(data)} bytes, not 32); "
                "restore it from a backup of the home: without it, earlier periods' subjects "
                "cannot be recognized"
            )
        return data

    def _connect(self, *, create: bool) -> sqlite3.Connection:
        if create and not self.path.exists():
            self._private_dir()
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
        conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        conn.execute(_SCHEMA)  # a no-op once made (a file made by a killed first write: now)
        return conn
