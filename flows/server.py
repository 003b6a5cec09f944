"""The local Prefect server ``sds`` keeps per SDS home: start, stop, status, reuse.

``sds server start`` (or a ``sds release`` that finds no Prefect API to talk to) starts a Prefect
server in the background on 127.0.0.1, its database in ``$SDS_HOME/prefect``; later releases
reuse it and start in seconds instead of waiting for a temporary server. The Prefect UI it serves
shows every run and artifact. A small supervisor process (``python -m flows.server``) owns the
server: it stops it on ``sds server stop``, when the home's record of it (``server.json``)
disappears, and, for a server a release started on its own, after an idle time without
releases. It also runs the home's warm release worker (``flows/worker.py``) and stops it with the
server; a server started by a release starts its worker only once that release has ended (the
release runs in-process and would otherwise share the cores with the worker's imports).

A new home's database is a copy of a **template**: the database a Prefect server of the installed
version creates on start (migrations, block registration), built once per Prefect version in the
user's cache directory (``make setup``, or by a supervisor in the background once its worker is
ready) and copied instead of migrating again (13 s of the 17 s a server took to start on a fresh
home). Prefect still checks the copy's migrations on start. Only the standard library is
imported here, except by the template builder (its own process).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from flows.handoff import ping, worker_enabled

__all__ = [
    "DEFAULT_IDLE_MINUTES",
    "ServerInfo",
    "build_template",
    "server_dir",
    "start",
    "status",
    "stop",
    "template_dir",
    "touch",
    "wait_healthy",
    "wait_worker",
]

STATE_FILE = "server.json"
LAST_USED_FILE = "server.last-used"
LOG_FILE = "server.log"
DEFAULT_IDLE_MINUTES = 60.0
"""A server started by a release (not by ``sds server start``) stops after this long unused."""
PREFERRED_PORT = 4200  # Prefect's usual port, when it is free
_POLL_S = 2.0
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

SERVER_SETTINGS = {
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "PREFECT_API_BLOCKS_REGISTER_ON_START": "true",  # a lasting server: Blocks page, secrets
    "PREFECT_UI_ENABLED": "true",  # the point of a lasting server: runs and artifacts in the UI
    "PREFECT__SERVER_FINAL": "1",  # as `prefect server start` sets for its uvicorn process
}


@dataclass(frozen=True)
class ServerInfo:
    """One home's server: where it answers, who supervises it, when it stops by itself."""

    home: str
    port: int
    pid: int
    started_at: str
    idle_timeout_s: float | None
    healthy: bool = False

    @property
    def api_url(self) -> str:
        """The ``PREFECT_API_URL`` of the server."""
        return f"http://127.0.0.1:{self.port}/api"

    @property
    def ui_url(self) -> str:
        """The Prefect UI."""
        return f"http://127.0.0.1:{self.port}"

    def describe(self) -> str:
        """One line for people: the UI, the process, when it stops, how to stop it."""
        when = (
            f"stops after {self.idle_timeout_s / 60:g} minutes without a release"
            if self.idle_timeout_s
            else "runs until stopped"
        )
        return (
            f"Prefect server for {self.home} at {self.ui_url} (supervisor pid {self.pid}, "
            f"database {server_dir(Path(self.home)) / 'prefect.db'}); it {when}; stop it with "
            f"`sds server stop --home {self.home}`"
        )


def server_dir(home: Path) -> Path:
    """``$SDS_HOME/prefect``: the server's database, record, log and lock."""
    return Path(home) / "prefect"


@contextlib.contextmanager
def _locked(home: Path) -> Iterator[None]:
    d = server_dir(home)
    d.mkdir(parents=True, exist_ok=True)
    with open(d / "server.lock", "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _healthy(port: int, timeout: float = 2.0) -> bool:
    try:
        url = f"http://127.0.0.1:{port}/api/health"
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def _read(home: Path) -> ServerInfo | None:
    try:
        data = json.loads((server_dir(home) / STATE_FILE).read_text())
        data.pop("healthy", None)
        return ServerInfo(**data)
    except (OSError, ValueError, TypeError):
        return None


def status(home: Path) -> ServerInfo | None:
    """The home's server if its supervisor is alive (``healthy``: it answers), else None.

    A record left by a supervisor that died is removed.
    """
    info = _read(home)
    if info is None:
        return None
    if not _alive(info.pid):
        with contextlib.suppress(OSError):
            (server_dir(home) / STATE_FILE).unlink()
        return None
    return ServerInfo(**{**asdict(info), "healthy": _healthy(info.port)})


def _free_port() -> int:
    for port in (PREFERRED_PORT, 0):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise OSError("no free TCP port on 127.0.0.1")  # pragma: no cover - bind(0) never fails


def start(
    home: Path,
    *,
    idle_timeout_s: float | None = None,
    port: int | None = None,
    worker_after: int | None = None,
) -> ServerInfo:
    """Start the home's server in the background (or return the running one); no waiting.

    Args:
        home: the SDS home; the database is ``<home>/prefect/prefect.db``.
        idle_timeout_s: stop after this many seconds without a release (None: never).
        port: the port (default 4200 when free, else any free port).
        worker_after: start the release worker only once this process has ended (the release
            that starts the server runs in it); None: at once.
    """
    home = Path(home).absolute()
    with _locked(home):
        running = status(home)
        if running is not None:
            return running
        port = port or _free_port()
        d = server_dir(home)
        log = open(d / LOG_FILE, "ab")  # handed to the detached process, closed here
        try:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "flows.server",
                    "--home",
                    str(home),
                    "--port",
                    str(port),
                    *(["--idle-timeout", str(idle_timeout_s)] if idle_timeout_s else []),
                    *(["--worker-after", str(worker_after)] if worker_after else []),
                ],
                cwd=str(d),
                env=_supervisor_env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # not killed with the terminal or the release's group
            )
        finally:
            log.close()
        info = ServerInfo(
            str(home),
            port,
            proc.pid,
            datetime.now(UTC).isoformat(timespec="seconds"),
            idle_timeout_s,
        )
        record = asdict(info)
        record.pop("healthy")
        (d / STATE_FILE).write_text(json.dumps(record, indent=2) + "\n")
        touch(home)
        return info


def _supervisor_env() -> dict[str, str]:
    """The environment of the supervisor: this one, with the project importable."""
    env = dict(os.environ)
    project = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [project, env.get("PYTHONPATH")]))
    return env


def wait_healthy(info: ServerInfo, timeout: float = 300.0) -> ServerInfo:
    """Block until the server answers; raise ``RuntimeError`` with its log if it cannot start."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if _healthy(info.port):
            return ServerInfo(**{**asdict(info), "healthy": True})
        if not _alive(info.pid):
            break
        time.sleep(0.2)
    log = server_dir(Path(info.home)) / LOG_FILE
    tail = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
    raise RuntimeError(
        f"the local Prefect server for {info.home} did not start within {timeout:.0f} s "
        f"(log {log}): {tail.strip()[-500:]}"
    )


def wait_worker(info: ServerInfo, timeout: float = 120.0) -> dict[str, object] | None:
    """Block until the home's release worker answers (it imports Prefect and the flow first);
    its ping answer, or None when it is disabled or did not come up (releases run in-process)."""
    if not worker_enabled():
        return None
    end = time.monotonic() + timeout
    while time.monotonic() < end and _alive(info.pid):
        answer = ping(Path(info.home))
        if answer is not None:
            return answer
        time.sleep(0.2)
    return None


def stop(home: Path, timeout: float = 60.0) -> ServerInfo | None:
    """Stop the home's server (its supervisor stops the server first); the info, or None."""
    home = Path(home).absolute()
    with _locked(home):
        info = status(home)
        if info is None:
            return None
        with contextlib.suppress(ProcessLookupError):
            os.kill(info.pid, signal.SIGTERM)
        end = time.monotonic() + timeout
        while _alive(info.pid) and time.monotonic() < end:
            time.sleep(0.1)
        if _alive(info.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(info.pid, signal.SIGKILL)  # its own session: the server goes too
        with contextlib.suppress(OSError):
            (server_dir(home) / STATE_FILE).unlink()
        return info


def touch(home: Path) -> None:
    """Record that a release used the server now (the idle timeout counts from here)."""
    path = server_dir(Path(home)) / LAST_USED_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


# -- the database template ---------------------------------------------------------------------
def _user_database() -> bool:
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
    if value.lower() in ("off", "0", "false", "no") or _user_database():
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


def _seed_database(home: Path) -> bool:
    """Copy the template into a home that has no database yet; whether it did."""
    template = template_dir()
    d = server_dir(home)
    if template is None or (d / DB_NAME).exists() or not (template / DB_NAME).is_file():
        return False
    tmp = d / f".{DB_NAME}.{os.getpid()}"
    try:
        shutil.copyfile(template / DB_NAME, tmp)
        if (template / MEMO_NAME).is_file():
            shutil.copyfile(template / MEMO_NAME, d / MEMO_NAME)
        tmp.replace(d / DB_NAME)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
    return True


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
    template.parent.mkdir(parents=True, exist_ok=True)
    for stale in template.parent.glob(".build-*"):  # left by a builder that was stopped
        pid = stale.name.removeprefix(".build-")
        if not pid.isdigit() or not _alive(int(pid)) or int(pid) == os.getpid():
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
    return template


def _start_template_build() -> subprocess.Popen[bytes] | None:
    """Build the template in a low-priority process if it is missing (None: nothing to do)."""
    template = template_dir()
    if template is None or (template / DB_NAME).is_file():
        return None
    return subprocess.Popen(
        [sys.executable, "-m", "flows.server", "--build-template", "--nice", "15"],
        env=_supervisor_env(),
        stdin=subprocess.DEVNULL,
    )


# -- the supervisor process -------------------------------------------------------------------
def _server_command(port: int) -> list[str]:
    spec = importlib.util.find_spec("prefect")
    app_dir = str(Path(spec.origin).parents[1]) if spec and spec.origin else "."
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "--app-dir",
        app_dir,
        "--factory",
        "prefect.server.api.server:create_app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]


def _server_env(home: Path, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(SERVER_SETTINGS)
    env["PREFECT_HOME"] = str(server_dir(home))
    env["PREFECT_SERVER_API_HOST"] = "127.0.0.1"
    env["PREFECT_SERVER_API_PORT"] = str(port)
    env["PREFECT_UI_API_URL"] = f"http://127.0.0.1:{port}/api"
    if not _user_database():
        env["PREFECT_API_DATABASE_CONNECTION_URL"] = DB_URL  # the server runs in server_dir
    return env


def _start_worker(home: Path, port: int) -> subprocess.Popen[bytes] | None:
    """The home's warm release worker (flows/worker.py), unless ``SDS_WORKER=off``."""
    if not worker_enabled():
        return None
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "flows.worker",
            "--home",
            str(home),
            "--api-url",
            f"http://127.0.0.1:{port}/api",
        ],
        env=env,
        stdin=subprocess.DEVNULL,
    )


def _stop_child(child: subprocess.Popen[bytes] | None) -> None:
    if child is None or child.poll() is not None:
        return
    child.terminate()
    try:
        child.wait(timeout=30)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def supervise(
    home: Path, port: int, idle_timeout_s: float | None, worker_after: int | None = None
) -> int:
    """Run the server and the release worker and watch them; returns the exit status (the
    supervisor's ``main``). The worker starts at once, or once the server answers and the
    process ``worker_after`` has ended; a worker that ends is not restarted (releases then run
    in-process). Once the worker is ready, a missing database template is built."""
    home = Path(home).absolute()
    if _seed_database(home):
        print(
            f"{datetime.now(UTC).isoformat()} sds server supervisor: database copied from "
            f"{template_dir()}",
            flush=True,
        )
    child = subprocess.Popen(
        _server_command(port),
        env=_server_env(home, port),
        cwd=str(server_dir(home)),
        stdin=subprocess.DEVNULL,
    )
    worker = None if worker_after else _start_worker(home, port)
    worker_due = worker is None and worker_enabled()
    builder: subprocess.Popen[bytes] | None = None
    build_due = True
    stopping = False

    def _stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    grace = time.monotonic() + 30  # start() writes the record right after starting us
    while (rec := _read(home)) is None or rec.pid != os.getpid():
        if time.monotonic() > grace or stopping:
            break
        time.sleep(0.1)
    reason = "stopped"
    while not stopping:
        if child.poll() is not None:
            reason = f"server exited with status {child.returncode}"
            break
        if worker_due and (worker_after is None or not _alive(worker_after)) and _healthy(port):
            worker, worker_due = _start_worker(home, port), False
        if build_due and not worker_due and (worker is None or ping(home) is not None):
            builder, build_due = _start_template_build(), False
        if builder is not None and builder.poll() is not None:
            builder = None
        if worker is not None and worker.poll() is not None:
            print(
                f"{datetime.now(UTC).isoformat()} sds server supervisor: release worker "
                f"exited with status {worker.returncode}; releases run in-process",
                flush=True,
            )
            worker = None
        info = _read(home)
        if info is None or info.pid != os.getpid():
            reason = "its record is gone (home removed or another server took over)"
            break
        if idle_timeout_s:
            try:
                idle = time.time() - (server_dir(home) / LAST_USED_FILE).stat().st_mtime
            except OSError:
                idle = idle_timeout_s + 1
            if idle > idle_timeout_s:
                reason = f"idle for {idle / 60:.0f} minutes"
                break
        time.sleep(_POLL_S)
    _stop_child(builder)
    _stop_child(worker)
    _stop_child(child)
    info = _read(home)
    if info is not None and info.pid == os.getpid():
        with contextlib.suppress(OSError):
            (server_dir(home) / STATE_FILE).unlink()
    print(f"{datetime.now(UTC).isoformat()} sds server supervisor: {reason}", flush=True)
    return 0 if reason == "stopped" or reason.startswith("idle") else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m flows.server --home H --port P [--idle-timeout S] [--worker-after PID]``: the
    supervisor; ``python -m flows.server --build-template``: build the database template."""
    ap = argparse.ArgumentParser(description="Supervise the Prefect server of an SDS home.")
    ap.add_argument("--home", type=Path)
    ap.add_argument("--port", type=int)
    ap.add_argument("--idle-timeout", type=float, default=None)
    ap.add_argument("--worker-after", type=int, default=None)
    ap.add_argument("--build-template", action="store_true")
    ap.add_argument("--nice", type=int, default=0, help="with --build-template: run niced")
    args = ap.parse_args(argv)
    if args.build_template:
        os.nice(args.nice)
        template = build_template()
        print(f"database template: {template or 'off'}", flush=True)
        return 0
    if args.home is None or args.port is None:
        ap.error("--home and --port are required")
    return supervise(args.home, args.port, args.idle_timeout, args.worker_after)


if __name__ == "__main__":
    sys.exit(main())
