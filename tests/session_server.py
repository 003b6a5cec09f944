"""The Prefect server that the test processes of one run share (the ``prefect_server`` fixture).

Each xdist process used to start its own (Prefect's test harness: a uvicorn process on a copy of
the database template). A start costs 8-10 CPU-s, the process waits for it, and the server then
idles beside the others to the end: 13-20 CPU-s each in a run of the whole suite. Now pytest's
main process starts it in the run's folder when the run holds the tests that need it, in the
background while its test processes start and collect (:func:`start_server`); a test process
that needs it first waits for it to answer, or starts it (:func:`server_url`); the others find
it there. The main process (it outlives its test processes) stops it at its exit
(:func:`stop_server`), and the server ends itself when that process is gone, killed or not
(:func:`serve`).

The tests on it already share it across modules: each reads its own flow runs, deployments and
artifacts by id, key or a name of its own, never the server's whole lists.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

SERVICES_OFF = {
    f"PREFECT_SERVER_SERVICES_{service}_ENABLED": "false"
    for service in (
        "TASK_RUN_RECORDER",  # task runs stored from their events: 0.23 of 0.54 CPU-s a release
        "EVENT_PERSISTER",
        "TRIGGERS",
        "FOREMAN",
        "LATE_RUNS",
        "PAUSE_EXPIRATIONS",
        "REPOSSESSOR",
        "CANCELLATION_CLEANUP",
    )
}
"""The session test server's background services, off: the tests on it read flow runs, their
states and logs, never task runs, events, automations or late, paused or leased runs (every
test on it passes so: `pytest -m server`). An in-process release of the tiny example cost this
server 0.54 CPU-s beside the release's own 0.44; with these off, 0.16 (docs/development.md).
The homes' servers of the e2e tests keep them all: what a custodian's server runs."""

RECORD = "server.json"
DB = "prefect-test.db"


def start_server(folder: Path, owner: int, template_db: Path | None) -> None:
    """Start the run's server in ``folder`` in the background unless a process has; returns at
    once (pytest's main process, before its test processes collect: the start overlaps that).

    ``owner`` is the pid whose end ends the server; ``template_db`` (a migrated Prefect
    database, or None) is copied as its database."""
    with _locked(folder):
        if not (folder / RECORD).is_file():
            _launch(folder, owner, template_db)


def server_url(folder: Path, owner: int, template_db: Path | None, timeout: float) -> str:
    """The API URL of the run's server in ``folder`` once it answers, started now if no process
    has yet (the arguments as :func:`start_server`'s)."""
    record = folder / RECORD
    deadline = time.monotonic() + timeout
    with _locked(folder):  # one process waits for the start; the others, for the lock
        while True:
            if not record.is_file():
                _launch(folder, owner, template_db)
            started = json.loads(record.read_text())
            url, pid = started["url"], started["pid"]
            if started["answered"]:  # a busy server may answer late: it is not asked again
                if not _alive(pid):
                    raise RuntimeError(f"the run's Prefect test server at {url} has ended")
                return str(url)
            while _alive(pid) and time.monotonic() < deadline:
                if _healthy(url):
                    record.write_text(json.dumps({**started, "answered": True}))
                    return str(url)
                time.sleep(0.1)
            if _alive(pid) or time.monotonic() >= deadline:
                raise RuntimeError(f"the Prefect test server did not answer in {timeout:.0f} s")
            log = _tail(folder / started["log"])
            if "address already in use" not in log:  # else its port was taken: another one
                raise RuntimeError(f"the Prefect test server ended before it answered: {log}")
            record.unlink()


def stop_server(folder: Path) -> None:
    """Stop the run's server in ``folder`` if one was started: SIGKILL, as nothing in it is
    kept (its database is removed with the folder), without a second of uvicorn's shutdown."""
    record = folder / RECORD
    if not record.is_file():
        return
    pid = json.loads(record.read_text())["pid"]
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):  # our child when this process started it
        os.waitpid(pid, 0)


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _launch(folder: Path, owner: int, template_db: Path | None) -> None:
    """Start the server process on a free port and record it (``answered`` false)."""
    db = folder / DB
    if template_db is not None and template_db.is_file() and not db.exists():
        shutil.copyfile(template_db, db)  # what a new database migrates to: 8 s less a start
    env = {
        **os.environ,
        **SERVICES_OFF,
        "PREFECT_HOME": str(folder / "home"),
        "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{db}",
        "PREFECT_UI_ENABLED": "0",  # as Prefect's own temporary server
        "PREFECT__SERVER_EPHEMERAL": "1",
        "PREFECT__SERVER_FINAL": "1",
    }
    env.pop("PREFECT_API_URL", None)
    port = _free_port()  # taken by another before uvicorn binds it: server_url starts another
    log = f"server-{port}.log"
    with open(folder / log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, __file__, str(owner), str(port)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a ^C reaches pytest, which stops it at exit
        )
    url = f"http://127.0.0.1:{port}/api"
    record = {"url": url, "pid": proc.pid, "log": log, "answered": False}
    (folder / RECORD).write_text(json.dumps(record))


def _alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):  # reaped here when it is this process's child
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:] if path.is_file() else ""


def _exit_without(owner: int) -> None:
    """End this server as soon as ``owner`` (pytest's main process) is gone."""
    while _alive(owner):
        time.sleep(1.0)
    os._exit(0)


def serve(owner: int, port: int) -> None:
    """Run the Prefect server on ``port`` until SIGTERM or the end of ``owner``."""
    threading.Thread(target=_exit_without, args=(owner,), daemon=True).start()
    import uvicorn

    uvicorn.run(
        "prefect.server.api.server:create_app",
        factory=True,
        host="127.0.0.1",
        port=port,
        log_level="error",
        lifespan="on",
    )


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
