"""A PostgreSQL table or query as the release's input: Arrow batches in, one ordered table and
its digest out.

The ingest stage and the pre-flight read ``postgresql://USER@HOST/DB`` with ``table`` or
``query`` here, through adbc-driver-postgresql (binary COPY straight into Arrow record batches;
docs/benchmarks.md has the measurement against psycopg 3). The session is READ ONLY, so a query
that writes fails before it changes anything. The rows are then sorted by every column (Arrow's
order: bytes for text, nulls last), so the table and its digest do not depend on the order the
server returns rows in, its collation or its storage; the digest is the sha256 of the Arrow IPC
stream of that ordered table.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sds_core.errors import SdsInputError
from sds_release.store.config.sources import source_name

__all__ = ["CONNECT_TIMEOUT_S", "IPC_BATCH_ROWS", "read_postgres", "table_digest"]

CONNECT_TIMEOUT_S = 10
"""libpq's ``connect_timeout`` when the URL sets none: an unreachable host is refused in seconds."""

IPC_BATCH_ROWS = 65_536
"""Rows per record batch of the IPC stream the digest is taken over (fixed: part of the digest)."""

_SHOWN_SQLSTATE_CLASSES = ("08", "25", "28", "3D", "3F", "42")
"""SQLSTATE classes whose server message is quoted (connection, read-only, authorization,
unknown database/schema, syntax or unknown name: they quote the SQL, never a value of the data);
other errors (e.g. class 22, a bad value) are named by their SQLSTATE only."""


def read_postgres(url: str, *, table: str | None, query: str | None) -> tuple[pa.Table, str]:
    """The rows of ``table`` (or of ``query``'s result) ordered by every column, and their
    :func:`table_digest`.

    The password comes from PGPASSWORD or ~/.pgpass (libpq); a URL holding one never gets here
    (:func:`sds_release.store.config.sources.source_refusal`).

    Raises:
        SdsInputError: the server cannot be reached or refuses the login, the table does not
            exist, the query is not one read-only SELECT or fails, the result has duplicate
            or unnamed columns, no rows, or a column that cannot be ordered.
    """
    import adbc_driver_postgresql.dbapi as adbc

    name = source_name(url, table=table, query=query)
    try:
        conn = adbc.connect(_with_timeout(url), autocommit=True)
    except adbc.Error as e:
        raise SdsInputError(
            f"cannot connect to the input database {name} ({_message(e)}): check that the "
            "server is running and the URL's host, port, user and database; keep the password "
            "in PGPASSWORD or ~/.pgpass"
        ) from None
    try:
        with conn.cursor() as cur:
            cur.execute("SET default_transaction_read_only = on")
            sql = query if query is not None else f"SELECT * FROM {_table_sql(cur, table, name)}"
            try:
                cur.execute(sql)
                reader = cur.fetch_record_batch()
                batches = list(reader)
                schema = reader.schema
            except adbc.Error as e:
                raise SdsInputError(_query_refusal(name, query, e)) from None
    finally:
        conn.close()
    rows = pa.Table.from_batches(batches, schema=schema)
    del batches
    rows = _plain_columns(rows, name)
    if rows.num_rows == 0:
        raise SdsInputError(f"input {name} has columns but no rows; give a table with data")
    ordered = _ordered(rows, name)
    return ordered, table_digest(ordered)


def _with_timeout(url: str) -> str:
    """``url`` with ``connect_timeout`` (:data:`CONNECT_TIMEOUT_S`) unless it sets one.

    >>> _with_timeout("postgresql://sds@db/census")
    'postgresql://sds@db/census?connect_timeout=10'
    """
    if "connect_timeout=" in url:
        return url
    return f"{url}{'&' if '?' in url else '?'}connect_timeout={CONNECT_TIMEOUT_S}"


def table_digest(table: pa.Table) -> str:
    """The sha256 of ``table``'s Arrow IPC stream, in batches of :data:`IPC_BATCH_ROWS` rows.

    >>> table_digest(pa.table({"a": ["x", "y"]}))[:12] == table_digest(pa.table({"a": ["x", "y"]}))[:12]
    True
    """  # noqa: E501
    sink = _HashSink()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table.combine_chunks(), max_chunksize=IPC_BATCH_ROWS)
    return sink.hash.hexdigest()


class _HashSink:
    """A write-only file object hashing what it is given (the IPC stream is never kept)."""

    def __init__(self) -> None:
        self.hash = hashlib.sha256()
        self.closed = False

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.hash.update(view)
        return view.nbytes

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def _table_sql(cur: Any, table: str | None, name: str) -> str:
    """``table`` resolved by the server as SQL resolves a name (search_path, unquoted names
    folded to lower case), quoted; refuses a table that does not exist."""
    import adbc_driver_postgresql.dbapi as adbc

    try:
        cur.execute("SELECT to_regclass($1)::text", parameters=(table,))
        found = cur.fetchone()
    except adbc.Error as e:
        raise SdsInputError(
            f"input {name}: {table!r} is not a table name ({_message(e)}); give --table as "
            "SQL names it, e.g. people or public.people"
        ) from None
    if found is None or found[0] is None:
        raise SdsInputError(
            f"input {name}: table {table!r} does not exist in that database (or the user may "
            "not see it); check --table (a table or view, e.g. public.people; unquoted names "
            "are lower case) or the URL's database"
        )
    return str(found[0])


def _query_refusal(name: str, query: str | None, e: Exception) -> str:
    state = _sqlstate(e)
    if state == "25006":
        return (
            f"input {name}: the query writes to the database ({_message(e)}); an input query "
            "is run READ ONLY and must be one SELECT: give --query 'SELECT ...'"
        )
    what = "the query" if query is not None else "reading the table"
    return (
        f"input {name}: {what} failed ({_message(e)}); fix --query (one SELECT) or --table, "
        "and check the user may read it"
    )


def _plain_columns(rows: pa.Table, name: str) -> pa.Table:
    """The result as plain Arrow columns: unique non-empty names, no field metadata (the
    driver's PostgreSQL type names), extension types (e.g. numeric) as their storage (text)."""
    names = rows.column_names
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup or any(not n.strip() for n in names):
        raise SdsInputError(
            f"input {name}: the result has duplicate or unnamed columns ({dup or names}); name "
            "every column once in the query (SELECT a, b AS b2, ...)"
        )
    columns = [
        c.cast(c.type.storage_type) if isinstance(c.type, pa.ExtensionType) else c
        for c in rows.columns
    ]
    fields = [pa.field(n, c.type) for n, c in zip(names, columns, strict=True)]
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def _ordered(rows: pa.Table, name: str) -> pa.Table:
    """The rows sorted by every column in turn, ascending, nulls last."""
    try:
        # nulls last: Arrow's default (null_placement is deprecated as an argument since 25)
        order = pc.sort_indices(rows, sort_keys=[(c, "ascending") for c in rows.column_names])
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise SdsInputError(
            f"input {name}: a column has a type the rows cannot be ordered by ({e}); select "
            "it as text in --query (e.g. SELECT col::text AS col, ...)"
        ) from None
    return rows.take(order).combine_chunks()


def _sqlstate(e: Exception) -> str:
    return str(getattr(e, "sqlstate", None) or "")


def _message(e: Exception) -> str:
    """The server's first error line, or only the SQLSTATE when the message could quote a
    value of the data (:data:`_SHOWN_SQLSTATE_CLASSES`)."""
    state = _sqlstate(e)
    if state and not state.startswith(_SHOWN_SQLSTATE_CLASSES):
        return f"SQLSTATE {state}"
    text = str(e)
    if "ERROR:" in text:
        text = text.split("ERROR:", 1)[1]
    first = (text.strip().splitlines() or [type(e).__name__])[0].strip()
    return first + (f", SQLSTATE {state}" if state else "")
