"""A throwaway PostgreSQL server for the tests: initdb + pg_ctl in a temporary directory.

The server listens only on a Unix socket in its directory (no TCP port, so concurrent test
sessions never collide) and trusts the local ``sds`` superuser. When the operating system's
``postgresql`` package is missing it is installed with apt-get (as root, as CI is); run
``python tests/pgserver.py install`` to do only that (``make test`` does, before pytest).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SUPERUSER = "sds"


def find_bindir() -> Path | None:
    """Directory holding initdb/pg_ctl/postgres (newest Debian version first), or None."""
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(candidate) / "initdb").is_file() and (Path(candidate) / "postgres").is_file():
            return Path(candidate)
    found = shutil.which("initdb")
    if found and (Path(found).resolve().parent / "postgres").is_file():
        return Path(found).resolve().parent
    return None


def ensure_installed() -> Path:
    """The PostgreSQL binaries, installing Debian's ``postgresql`` package when missing.

    Raises:
        RuntimeError: missing and this process cannot install packages (not root, no apt-get).
    """
    bindir = find_bindir()
    if bindir is not None:
        return bindir
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise RuntimeError(
            "PostgreSQL is not installed and cannot be installed from here (needs root and "
            "apt-get); install the operating system's postgresql package (e.g. `sudo apt-get "
            "install -y postgresql`), or run `make test` as root"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "postgresql"],
        check=True,
        env=env,
    )
    bindir = find_bindir()
    if bindir is None:
        raise RuntimeError("apt-get installed postgresql but initdb/postgres were not found")
    return bindir


class PgServer:
    """One PostgreSQL cluster in a temporary directory, reachable on a Unix socket there."""

    def __init__(self, bindir: Path) -> None:
        """Create and start the cluster (fsync off: a test server, not a durable one)."""
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="sds-pg-"))  # short: socket paths max ~100
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._owner = self._server_user()
        os.chmod(self.root, 0o755)
        if self._owner is not None:
            pw = pwd.getpwnam(self._owner)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        self._run(
            "initdb", "-D", str(self.data), "-A", "trust", "-U", SUPERUSER, "-E", "UTF8",
            "--no-sync", "--locale=C",
        )  # fmt: skip
        self.start()
        self._counter = 0
        self._databases: list[str] = []

    @staticmethod
    def _server_user() -> str | None:
        """Root may not run initdb/postgres: use the ``postgres`` system user then."""
        if os.geteuid() != 0:
            return None
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            subprocess.run(
                ["useradd", "--system", "--no-create-home", "--shell", "/bin/false", "postgres"],
                check=True,
            )
        return "postgres"

    def _run(self, tool: str, *args: str) -> None:
        cmd = [str(self.bindir / tool), *args]
        if self._owner is not None:
            cmd = ["runuser", "-u", self._owner, "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=self.root)
        if done.returncode != 0:
            log = self.log.read_text() if self.log.is_file() else ""
            raise RuntimeError(f"{tool} failed: {done.stdout}{done.stderr}{log}")

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "120", "-o",
            f"-k {self.root} -c listen_addresses='' -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off -c max_connections=200",
            "start",
        )  # fmt: skip

    def halt(self) -> None:
        """Stop the server (``fast``: open connections are cut, as a restart cuts them); the
        cluster stays for :meth:`start`."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "120", "stop")

    def url(self, database: str = "postgres") -> str:
        """libpq URL of ``database`` on this server (Unix socket in ``root``)."""
        return f"postgresql://{SUPERUSER}@/{database}?host={self.root}"

    def create_database(self, prefix: str = "ledger") -> str:
        """A new empty database; returns its URL."""
        import psycopg

        name = f"{prefix}_{os.getpid()}_{len(self._databases)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self._databases.append(name)
        return self.url(name)

    def create_schema(self, prefix: str = "ledger") -> str:
        """A new empty schema in the shared ``ledgers`` database (much faster than a database);
        returns a URL whose ``search_path`` is that schema."""
        import psycopg

        if not self._counter:
            with psycopg.connect(self.url(), autocommit=True) as conn:
                conn.execute("CREATE DATABASE ledgers")
        self._counter += 1
        name = f"{prefix}_{os.getpid()}_{self._counter}"
        with psycopg.connect(self.url("ledgers"), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{name}"')
        return f"{self.url('ledgers')}&options=-csearch_path%3D{name}"

    def stop(self) -> None:
        """Stop at once and remove the directory."""
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["install"]:
        print(f"postgresql binaries: {ensure_installed()}")
    else:
        sys.exit("usage: python tests/pgserver.py install")
