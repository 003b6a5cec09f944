"""Where the ledger is stored: the ledger URL, and the SQLite and PostgreSQL backends.

A ledger URL is ``sqlite:///PATH`` (the default: ``$SDS_HOME/ledger.sqlite``) or
``postgresql://USER@HOST/DB``. Both backends hold the same tables
(:mod:`sds_release.store.ledger.schema`), rows and hash chain
(:mod:`sds_release.store.ledger.chain`); they differ only in how a write is serialized: SQLite takes
its file lock (``BEGIN IMMEDIATE``), PostgreSQL a row lock on the chain head. Used only by
:mod:`sds_release.store.ledger.book`; psycopg is imported only when a PostgreSQL URL is opened.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

from sds_core.errors import SdsInputError
from sds_release.store.ledger.schema import POSTGRES_SCHEMA, SCHEMA_VERSION, SQLITE_SCHEMA
from sds_release.store.workspace.home import LEDGER_FILE

__all__ = [
    "LEDGER_FILE",
    "LEDGER_URL_ENV",
    "LedgerCorruptError",
    "LedgerStore",
    "LedgerUnavailableError",
    "PostgresStore",
    "SqliteStore",
    "default_ledger_url",
    "open_store",
    "redact_url",
    "resolve_ledger_url",
    "split_password",
    "sqlite_path",
]

LEDGER_URL_ENV = "SDS_LEDGER_URL"
BUSY_TIMEOUT_S = 60.0
T = TypeVar("T")

_SCHEMA_LOCK = 0x5D5_1ED6  # pg_advisory_xact_lock key: one process creates the schema at a time


class LedgerCorruptError(RuntimeError):
    """The ledger fails its integrity checks; run `sds audit --verify` to see where."""


class LedgerUnavailableError(SdsInputError):
    """The ledger's server did not answer for the whole busy timeout (nothing was recorded):
    a passing outage, so a release it stopped can be resumed once the server answers."""


class Conn(Protocol):
    """What the ledger needs of a connection inside a transaction (``?`` placeholders)."""

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        """Run one statement; the result iterates rows that index by position and by name."""
        ...


class LedgerStore(Protocol):
    """A ledger backend: serialized write transactions and consistent read snapshots."""

    url: str  # redacted: safe to print, log and publish
    kind: str  # "sqlite" | "postgresql"
    path: Path | None  # the SQLite file, None for PostgreSQL

    def write(self, body: Callable[[Conn], T]) -> T:
        """Run ``body`` in one write transaction that no other writer interleaves with."""
        ...

    def read(self, body: Callable[[Conn], T]) -> T:
        """Run ``body`` on one consistent snapshot of the ledger."""
        ...


# -- URLs ------------------------------------------------------------------------------------------
def default_ledger_url(home: str | Path) -> str:
    """``sqlite:///<home>/ledger.sqlite`` (absolute, so four slashes on POSIX).

    >>> default_ledger_url("/srv/sds")
    'sqlite:////srv/sds/ledger.sqlite'
    """
    return f"sqlite:///{(Path(home).expanduser().absolute() / LEDGER_FILE).as_posix()}"


def resolve_ledger_url(home: str | Path, url: str | None = None) -> str:
    """The ledger URL in force: ``url`` (--ledger or config), else $SDS_LEDGER_URL, else SQLite
    in ``home``."""
    return url or os.environ.get(LEDGER_URL_ENV) or default_ledger_url(home)


def redact_url(url: str) -> str:
    """The URL without its password (``postgresql://u:***@host/db``), safe to print or store.

    >>> redact_url("postgresql://sds:secret@db.example/ledger")
    'postgresql://sds:***@db.example/ledger'
    >>> redact_url("sqlite:////srv/sds/ledger.sqlite")
    'sqlite:////srv/sds/ledger.sqlite'
    """
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rpartition("@")
    user = netloc[0].partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[2]}"))


def split_password(url: str) -> tuple[str, str | None]:
    """(the URL without its password, the password or None): the flow's parameters (stored by
    Prefect) get the first, libpq gets the second through ``PGPASSWORD``.

    >>> split_password("postgresql://sds:pw@db/ledger")
    ('postgresql://sds@db/ledger', 'pw')
    """
    parts = urlsplit(url)
    if parts.password is None:
        return url, None
    netloc = parts.netloc.rpartition("@")
    user = netloc[0].partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc[2]}")), unquote(parts.password)


def _scheme(url: str) -> str:
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    return {"postgres": "postgresql", "postgresql+psycopg": "postgresql"}.get(scheme, scheme)


def sqlite_path(url: str) -> Path | None:
    """The file of a ``sqlite:///`` URL (SQLAlchemy's form: ``sqlite:////abs``, ``sqlite:///rel``);
    None for any other kind of URL.

    >>> sqlite_path("sqlite:////srv/sds/ledger.sqlite")
    PosixPath('/srv/sds/ledger.sqlite')
    """
    if _scheme(url) != "sqlite":
        return None
    rest = url.split("://", 1)[1]
    if not rest.startswith("/") or rest == "/":
        raise SdsInputError(
            f"ledger URL {redact_url(url)!r}: write sqlite:///relative/path or "
            "sqlite:////absolute/path (three slashes, then the path)"
        )
    return Path(unquote(rest[1:]))


def open_store(
    url: str, *, busy_timeout: float = BUSY_TIMEOUT_S, wait: bool = False
) -> LedgerStore:
    """The backend of a ledger URL (created and schema-checked); with ``wait``, a PostgreSQL
    server that does not answer is retried for ``busy_timeout`` s, as writes are (a running
    release's ledger: it answered at the reservation, so a restart is passing).

    Raises:
        SdsInputError: a URL of no supported kind, or a ledger that cannot be opened (naming
            the redacted URL and the fix).
        LedgerCorruptError: the database is not a ledger of this schema version.
    """
    path = sqlite_path(url)
    if path is not None:
        return SqliteStore(path, busy_timeout=busy_timeout)
    if _scheme(url) == "postgresql":
        return PostgresStore(url, busy_timeout=busy_timeout, wait=wait)
    raise SdsInputError(
        f"ledger URL {redact_url(url)!r} is not supported: use sqlite:///PATH or "
        "postgresql://USER@HOST/DATABASE (--ledger, SDS_LEDGER_URL or `ledger` in the config)"
    )


# -- SQLite ----------------------------------------------------------------------------------------
class SqliteStore:
    """The ledger in one SQLite file: every write is one ``BEGIN IMMEDIATE`` transaction.

    Each call opens its own connection, so a store may be shared by threads, and separate
    processes on one machine serialize on SQLite's file lock (busy timeout ``busy_timeout`` s).
    SQLite's locking is not safe on network filesystems: use PostgreSQL for several machines.
    """

    kind = "sqlite"

    def __init__(self, path: Path, *, busy_timeout: float = BUSY_TIMEOUT_S) -> None:
        self.path: Path | None = Path(path)
        self.url = f"sqlite:///{self.path.as_posix()}"
        self.busy_timeout = busy_timeout
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # a home, usually
            conn = self._connect()
            try:
                has_meta = conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
                ).fetchone()
                if not has_meta:  # a failed script leaves its transaction open: close rolls back
                    conn.executescript(f"BEGIN IMMEDIATE;{SQLITE_SCHEMA}COMMIT;")
                row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            finally:
                conn.close()
            if self.path.is_file():
                os.chmod(self.path, 0o600)  # the ledger names every dataset and release
        except (OSError, sqlite3.OperationalError) as e:
            raise SdsInputError(
                f"cannot open the ledger {self.path} ({e}): the SDS home must be a writable "
                "directory; pass another one with --home or set SDS_HOME"
            ) from e
        except sqlite3.DatabaseError as e:
            raise LedgerCorruptError(f"{self.path} is not a readable sqlite ledger: {e}") from e
        _check_version(self.url, row)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path or "", timeout=self.busy_timeout, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        return conn

    def write(self, body: Callable[[Conn], T]) -> T:
        """``BEGIN IMMEDIATE``: only one process at a time checks and appends."""
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                out = body(conn)
            except BaseException:
                if conn.in_transaction:  # SQLite rolls back itself on some errors (a full disk)
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")  # a COMMIT that fails is rolled back by close()
            return out
        finally:
            conn.close()

    def read(self, body: Callable[[Conn], T]) -> T:
        """One deferred transaction: a consistent snapshot across the queries."""
        conn = self._connect()
        try:
            conn.execute("BEGIN")
            out = body(conn)
            conn.execute("COMMIT")
            return out
        finally:
            conn.close()

    @contextmanager
    def raw(self) -> Iterator[sqlite3.Connection]:
        """A plain autocommit connection (migration and tests)."""
        conn = self._connect()
        try:
            yield conn
        finally:
            conn.close()


# -- PostgreSQL ------------------------------------------------------------------------------------
class _Row(tuple):  # type: ignore[type-arg]
    """A result row that indexes by position and by column name, like ``sqlite3.Row``."""

    _index: dict[str, int]

    def __new__(cls, values: Sequence[Any], index: dict[str, int]) -> _Row:
        row = super().__new__(cls, values)
        row._index = index
        return row

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return super().__getitem__(self._index[key])
        return super().__getitem__(key)

    def keys(self) -> list[str]:
        """Column names, in order."""
        return list(self._index)


def _row_factory(cursor: Any) -> Callable[[Sequence[Any]], _Row]:
    index = {c.name: i for i, c in enumerate(cursor.description or ())}
    return lambda values: _Row(values, index)


class _PgConn:
    """A psycopg connection speaking the ledger's ``?`` placeholders."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self.conn.execute(sql.replace("?", "%s"), tuple(args))


class PostgresStore:
    """The ledger in a PostgreSQL database (psycopg 3), for workers on several machines.

    A write runs in one READ COMMITTED transaction whose first statement locks the chain head
    (``SELECT ... FROM meta WHERE key = 'head_seq' FOR UPDATE``): writers queue on that row
    lock, and every later statement of the holder sees every committed write, so the budget
    check and the append are as serialized as SQLite's ``BEGIN IMMEDIATE``. A serialization
    failure, deadlock or dropped connection is retried (with jittered backoff) until
    ``busy_timeout`` seconds have passed. Reads use one REPEATABLE READ snapshot.
    """

    kind = "postgresql"
    path: Path | None = None

    def __init__(
        self, url: str, *, busy_timeout: float = BUSY_TIMEOUT_S, wait: bool = False
    ) -> None:
        """Connect, creating the tables if needed; ``wait``: retry a server that does not
        answer (:meth:`_retrying`) instead of refusing at once."""
        try:
            import psycopg
        except ImportError as e:  # pragma: no cover - psycopg is a project dependency
            raise SdsInputError(
                "a postgresql:// ledger needs psycopg 3: pip install 'psycopg[binary]'"
            ) from e
        self._psycopg = psycopg
        self.dsn = "postgresql" + url[url.index("://") :]
        self.url = redact_url(self.dsn)
        self.busy_timeout = busy_timeout

        def attempt() -> Any:
            with self._connect() as conn, conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                exists = conn.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()[0]
                if not exists:
                    conn.execute(POSTGRES_SCHEMA)
                return conn.execute(
                    "SELECT value FROM meta WHERE key = 'schema_version'"
                ).fetchone()

        try:
            row = self._retrying(attempt) if wait else attempt()
        except psycopg.Error as e:
            raise SdsInputError(
                f"cannot open the ledger {self.url} ({_pg_message(e)}): check that the server "
                "is running, the database exists and the user may create tables in it; give "
                "the URL with --ledger, SDS_LEDGER_URL or `ledger` in the config (passwords "
                "are better kept in PGPASSWORD or ~/.pgpass than in the URL)"
            ) from None
        _check_version(self.url, row)

    def _connect(self) -> Any:
        return self._psycopg.connect(
            self.dsn,
            row_factory=_row_factory,
            connect_timeout=max(1, int(self.busy_timeout)),
            application_name="sds-ledger",
        )

    def _retrying(self, body: Callable[[], T]) -> T:
        errors = self._psycopg.errors
        retry = (
            errors.SerializationFailure,
            errors.DeadlockDetected,
            self._psycopg.OperationalError,
        )
        deadline, pause = time.monotonic() + self.busy_timeout, 0.005
        while True:
            try:
                return body()
            except retry as e:
                if time.monotonic() + pause > deadline:
                    raise LedgerUnavailableError(
                        f"the ledger {self.url} stayed unavailable for {self.busy_timeout:g} s "
                        f"({_pg_message(e)}); nothing was recorded, try again"
                    ) from None
                time.sleep(pause * (0.5 + random.random()))
                pause = min(pause * 2, 0.5)

    def write(self, body: Callable[[Conn], T]) -> T:
        """One transaction holding the head row lock; retried on serialization failure."""

        def attempt() -> T:
            with self._connect() as conn:
                with conn.transaction():
                    conn.execute("SELECT value FROM meta WHERE key = 'head_seq' FOR UPDATE")
                    return body(_PgConn(conn))

        return self._retrying(attempt)

    def read(self, body: Callable[[Conn], T]) -> T:
        """One REPEATABLE READ, READ ONLY snapshot."""

        def attempt() -> T:
            with self._connect() as conn:
                conn.isolation_level = self._psycopg.IsolationLevel.REPEATABLE_READ
                conn.read_only = True
                with conn.transaction():
                    return body(_PgConn(conn))

        return self._retrying(attempt)

    @contextmanager
    def raw(self) -> Iterator[Any]:
        """A plain autocommit psycopg connection (migration and tests)."""
        with self._psycopg.connect(self.dsn, autocommit=True) as conn:
            yield conn


def _pg_message(e: BaseException) -> str:
    """The first line of a psycopg error (never the password, which libpq does not echo)."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _check_version(url: str, row: Any) -> None:
    version = None if row is None else row[0]
    if version != SCHEMA_VERSION:
        raise LedgerCorruptError(f"{url}: unknown ledger schema version {version!r}")
