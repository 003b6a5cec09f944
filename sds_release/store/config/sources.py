"""What a release's ``input`` names: a file (CSV, Parquet, a Parquet dataset), a PostgreSQL
table or query (``postgresql://USER@HOST[:PORT]/DB`` with ``table`` or ``query``) or objects in
an object store (``s3://BUCKET/...``: :mod:`sds_release.store.storage.urls`).

Only the naming rules live here (no connection): which inputs are PostgreSQL URLs, the one
paragraph refusing a bad combination, and the names a manifest publishes. Reading is
:mod:`sds_release.store.inputs.postgres`.
"""

from __future__ import annotations

from pathlib import PurePath
from urllib.parse import quote, urlsplit

from sds_release.store.storage.urls import ObjectSource, is_object_url

__all__ = ["is_local_path", "is_postgres_url", "public_input", "source_name", "source_refusal"]

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(text: str) -> bool:
    """Whether ``text`` names a PostgreSQL database rather than a file.

    >>> is_postgres_url("postgresql://sds@db/census"), is_postgres_url("/data/in.csv")
    (True, False)
    """
    return text.lower().startswith(POSTGRES_SCHEMES)


def is_local_path(text: str) -> bool:
    """Whether ``text`` names a local file or dataset (neither a database nor objects).

    >>> is_local_path("in.csv"), is_local_path("s3://sds-data/in/")
    (True, False)
    """
    return not (is_postgres_url(text) or is_object_url(text))


def source_refusal(text: str, *, table: str | None, query: str | None, executor: str) -> str | None:
    """Why ``input`` with these ``table``/``query``/``executor`` cannot be read, or None.

    >>> source_refusal("postgresql://sds@db/census", table=None, query=None, executor="local")[:40]
    'the input postgresql://sds@db/census is '
    >>> source_refusal("in.csv", table="people", query=None, executor="local")[:36]
    "table 'people' reads from PostgreSQL"
    """
    if not is_postgres_url(text):
        given = "table" if table is not None else "query" if query is not None else None
        if given is None:
            return _object_refusal(text) if is_object_url(text) else None
        return (
            f"{given} {table if given == 'table' else query!r} reads from PostgreSQL, but the "
            f"input is {'in an object store' if is_object_url(text) else 'a file'}: give the "
            f"input as postgresql://USER@HOST/DB, or leave out --{given}"
        )
    try:
        parts = urlsplit(text)
        has_password = parts.password is not None
    except ValueError as e:
        return f"the input URL cannot be parsed ({e}): write postgresql://USER@HOST[:PORT]/DB"
    if has_password:
        return (
            "the input URL holds a password, which would be recorded with the release's "
            "parameters: remove it from the URL and keep it in PGPASSWORD or ~/.pgpass"
        )
    if (table is None) == (query is None):
        both = "both --table and --query" if table is not None else "neither --table nor --query"
        return (
            f"the input {text} is a PostgreSQL database and {both} was given: pass exactly one, "
            "--table T (a table or view, e.g. public.people) or --query 'SELECT ...'"
        )
    if executor == "dask":
        return (
            "a PostgreSQL input is read by the flow's process, not by Dask workers: release "
            'it with --executor local (or executor = "local" in the config), or export the '
            "table to Parquet part files for the Dask executor"
        )
    return None


def _object_refusal(text: str) -> str | None:
    """Why an ``s3://`` input cannot be read, or None: a malformed URL (never a credential)."""
    from sds_core.errors import SdsInputError

    try:
        ObjectSource.parse(text)
    except SdsInputError as e:
        return str(e)
    return None


def public_input(text: str) -> str:
    """The input as a manifest names it: a file by its name only (never the local path), a
    PostgreSQL URL as given (it holds no password: :func:`source_refusal`), an ``s3://``
    input as given (it holds no credential: :meth:`ObjectSource.parse`).

    >>> public_input("/srv/data/people.csv"), public_input("postgresql://sds@db/census")
    ('people.csv', 'postgresql://sds@db/census')
    >>> public_input("s3://sds-data/people/")
    's3://sds-data/people/'
    """
    return PurePath(text).name if is_local_path(text) else text


def source_name(text: str, *, table: str | None, query: str | None) -> str:
    """The manifest's ``input.name``: :func:`public_input`, with ``table=T`` (or ``query``,
    whose text is the ``query`` parameter) added to a PostgreSQL URL's query string.

    >>> source_name("postgresql://sds@db/census", table="people", query=None)
    'postgresql://sds@db/census?table=people'
    >>> source_name("postgresql://sds@/census?host=/run/pg", table=None, query="SELECT 1")
    'postgresql://sds@/census?host=/run/pg&query'
    """
    name = public_input(text)
    if not is_postgres_url(text):
        return name
    what = f"table={quote(table, safe='.')}" if table is not None else "query"
    return f"{name}{'&' if '?' in name else '?'}{what}"
