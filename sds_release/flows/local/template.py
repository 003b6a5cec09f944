"""The Prefect database template a new home's server starts from.

A new home's database is a copy of a **template**: the database a Prefect server of the installed
version creates on start (migrations, block registration), built once per Prefect version in the
user's cache directory (``make setup``: ``python -m sds_release.flows.local.template``, or by a
supervisor in the background once its runner is ready) and copied instead of migrating again (13 s
of the 17 s a server took to start on a fresh home). Prefect still checks the copy's migrations on
start. Only the standard library is imported here, except by the builder (its own process).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from sds_release.flows.local.server import SERVER_SETTINGS, alive, server_dir, supervisor_env
from sds_release.store.workspace.home import private_umask

TEMPLATE_ENV = "SDS_PREFECT_TEMPLATE"
"""``off`` disables the database template; a directory puts the templates there (default
``$XDG_CACHE_HOME/sds/prefect-db``, i.e. ``~/.cache/sds/prefect-db``)."""
DB_NAME = "prefect.db"
DB_URL = f"sqlite+aiosqlite:///{DB_NAME}"
"""Relative to the server's working directory (the home's ``prefect/``): every home's server, and
the template builder, name their database alike, so the block-registration memo Prefect keys by
that URL (``memo_store.toml``) travels with the template and the copy does not register again."""
MEMO_NAME = "memo_store.toml"
_TEMPLATE_KEY_PACKAGES = ("prefect", "sqlalchemy", "alembic", "aiosqlite")
_USER_DB_VARS = ("PREFECT_API_DATABASE_CONNECTION_URL", "PREFECT_SERVER_DATABASE_CONNECTION_URL")


# -- the database template ---------------------------------------------------------------------
def user_database() -> bool:
    """Whether the user chose Prefect's database (then no template, no relative URL)."""
    return any(os.environ.get(k) for k in _USER_DB_VARS)


def template_dir() -> Path | None:
    """This Prefect installation's template directory (``prefect.db`` + ``memo_store.toml``),
    or None when templates are off or the user chose the database.

    Keyed by Python's version and the versions of every installed ``prefect*`` distribution
    (they decide the migrations and the registered blocks) and of SQLAlchemy, Alembic and
    aiosqlite (they run the migrations).
    """
    value = os.environ.get(TEMPLATE_ENV, "").strip()
    if value.lower() in ("off", "0", "false", "no") or user_database():
        return None
    if value:
        base = Path(value).expanduser()
    else:
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        base = Path(cache) / "sds" / "prefect-db"
    versions = sorted(
        f"{d.metadata['Name'].lower()}=={d.version}"
        for d in importlib.metadata.distributions()
        if (d.metadata["Name"] or "").lower().startswith(_TEMPLATE_KEY_PACKAGES)
    )
    key = hashlib.sha256("\n".join([sys.version.split()[0], *versions]).encode()).hexdigest()[:16]
    return base / key


def seed_database(home: Path) -> bool:
    """Copy the template into a home that has no database yet (0600, as the server's own
    files: its runs will be in it); whether it did."""
    return seed_database_in(server_dir(home))


def seed_database_in(d: Path) -> bool:
    """:func:`seed_database` for the Prefect home ``d`` (its ``prefect.db``), e.g. the one of
    Prefect's temporary server (``SDS_SERVER=temporary``); ``d`` must exist."""
    template = template_dir()
    if template is None or (d / DB_NAME).exists() or not (template / DB_NAME).is_file():
        return False
    tmp = d / f".{DB_NAME}.{os.getpid()}"
    try:
        _copy_private(template / DB_NAME, tmp)
        if (template / MEMO_NAME).is_file():
            _copy_private(template / MEMO_NAME, d / MEMO_NAME)
        tmp.replace(d / DB_NAME)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
    return True


def _copy_private(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` (replaced), which is 0600 from its creation."""
    with contextlib.suppress(FileNotFoundError):
        target.unlink()
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with open(source, "rb") as src, os.fdopen(fd, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)


def _template_env(directory: Path) -> dict[str, str]:
    """The builder's environment: the server's, with its home in ``directory``."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(SERVER_SETTINGS)
    env["PREFECT_HOME"] = str(directory)
    env["PREFECT_API_DATABASE_CONNECTION_URL"] = DB_URL
    return env


def build_template() -> Path | None:
    """Build this installation's template (in this process; it imports Prefect's server):
    what a server's start does to a new database, i.e. Prefect's migrations and its memoized
    block registration, into a temporary directory that is then renamed into place. Returns
    the template directory (None when templates are off); an existing template is kept."""
    template = template_dir()
    if template is None or (template / DB_NAME).is_file():
        return template
    work = template.parent / f".build-{os.getpid()}"
    with private_umask():  # 0700 whatever the umask: a new home's database is copied from here
        template.parent.mkdir(parents=True, exist_ok=True)
        _build(template, work)
    return template


def _build(template: Path, work: Path) -> None:
    """:func:`build_template`'s work, in ``work`` (removed at the end)."""
    for stale in template.parent.glob(".build-*"):  # left by a builder that was stopped
        pid = stale.name.removeprefix(".build-")
        if not pid.isdigit() or not alive(int(pid)) or int(pid) == os.getpid():
            shutil.rmtree(stale, ignore_errors=True)
    work.mkdir()
    try:
        os.chdir(work)
        os.environ.clear()
        os.environ.update(_template_env(work))
        import asyncio

        from prefect.server.api import server as prefect_server
        from prefect.server.database import provide_database_interface
        from prefect.server.models.block_registration import run_block_auto_registration

        async def migrate() -> None:
            db = provide_database_interface()
            await db.create_db()  # as the server's run_migrations

        async def register() -> None:
            db = provide_database_interface()
            async with await db.session() as session:
                await run_block_auto_registration(session=session)

        asyncio.run(migrate())
        # the server's own memo (Prefect's private helper; without it the copy registers again)
        memoize = getattr(prefect_server, "_memoize_block_auto_registration", None)
        asyncio.run(memoize(register)() if memoize else register())
        with sqlite3.connect(work / DB_NAME) as src, sqlite3.connect(work / "template.db") as dst:
            src.backup(dst)  # one self-contained file (the WAL folded in)
        (work / "template.db").replace(work / "final.db")
        final = work / "ready"
        final.mkdir()
        (work / "final.db").replace(final / DB_NAME)
        if (work / MEMO_NAME).is_file():
            (work / MEMO_NAME).replace(final / MEMO_NAME)
        try:
            final.replace(template)
        except OSError:  # another builder was first: keep theirs
            pass
    finally:
        shutil.rmtree(work, ignore_errors=True)


def start_template_build() -> subprocess.Popen[bytes] | None:
    """Build the template in a low-priority process if it is missing (None: nothing to do)."""
    template = template_dir()
    if template is None or (template / DB_NAME).is_file():
        return None
    return subprocess.Popen(
        [sys.executable, "-m", "sds_release.flows.local.template", "--nice", "15"],
        env=supervisor_env(),
        stdin=subprocess.DEVNULL,
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m sds_release.flows.local.template [--nice N]``: build this installation's
    template."""
    ap = argparse.ArgumentParser(description="Build the Prefect database template of new homes.")
    ap.add_argument("--nice", type=int, default=0, help="run niced")
    args = ap.parse_args(argv)
    os.nice(args.nice)
    template = build_template()
    print(f"database template: {template or 'off'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
