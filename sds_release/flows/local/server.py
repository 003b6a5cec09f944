"""The local Prefect server ``sds`` keeps per SDS home: start, stop, status, reuse.

``sds server start`` (or a ``sds release`` that finds no Prefect API to talk to) starts a Prefect
server in the background on 127.0.0.1, its database in ``$SDS_HOME/prefect``; later releases
reuse it and start in seconds instead of waiting for a temporary server. The Prefect UI it serves
shows every run and artifact. A supervisor process (:mod:`sds_release.flows.local.supervisor`) owns
the server and the home's warm release runner; this module is the client side: the record
``server.json``, starting the supervisor, waiting for the server, stopping it. Everything under
the home's ``prefect/`` is private to the home's owner (folders 0700, files 0600): the database
holds every run's parameters, logs and artifacts. Only the standard library (and the home's
layout) is imported here.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from sds_release.flows.local.handoff import legacy_ping, ping, runner_enabled
from sds_release.store.workspace.home import (
    PRIVATE_UMASK,
    make_home_folders_private,
    make_private,
)
from sds_release.store.workspace.source_tree import project_root

__all__ = [
    "AUTH_ENV",
    "AUTH_FILE",
    "DEFAULT_IDLE_MINUTES",
    "SERVER_SETTINGS",
    "ServerInfo",
    "alive",
    "api_auth",
    "client_env",
    "healthy",
    "make_home_private",
    "read_record",
    "server_dir",
    "start",
    "status",
    "stop",
    "supervisor_env",
    "touch",
    "wait_healthy",
    "wait_runner",
]

STATE_FILE = "server.json"
LAST_USED_FILE = "server.last-used"
LOG_FILE = "server.log"
DEFAULT_IDLE_MINUTES = 60.0
"""A server started by a release (not by ``sds server start``) stops after this long unused."""
PREFERRED_PORT = 4200  # Prefect's usual port, when it is free
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


AUTH_FILE = Path("private") / "_prefect" / "api-auth"
"""The home's API credential (``sds:<random>``, mode 0600, in the private part of the home): the
home's server requires it (``PREFECT_SERVER_API_AUTH_STRING``) and every ``sds`` client of that
server sends it (``PREFECT_API_AUTH_STRING``). Made when the home's server first starts."""
AUTH_ENV = "PREFECT_API_AUTH_STRING"


def api_auth(home: Path, *, create: bool = False) -> str | None:
    """The home's API credential (``user:password`` for basic authentication), or None when the
    home has none yet and ``create`` is false, or when this user cannot read it.

    Created with ``create``: 32 random bytes, written 0600 in a 0700 directory, atomically (a
    concurrent creator's file wins).
    """
    path = Path(home) / AUTH_FILE
    try:
        return path.read_text(encoding="ascii").strip() or None
    except FileNotFoundError:
        if not create:
            return None
    except OSError:
        return None
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path.parent, 0o700)
    value = f"sds:{secrets.token_urlsafe(32)}"
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(value + "\n")
    try:
        os.link(tmp, path)  # fails if another process made it first: theirs is the credential
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return path.read_text(encoding="ascii").strip()


def client_env(home: Path, info: ServerInfo) -> dict[str, str]:
    """What a client of the home's server needs in its environment: the URL and, when this user
    can read it, the credential."""
    out = {"PREFECT_API_URL": info.api_url}
    auth = api_auth(home)
    if auth is not None:
        out[AUTH_ENV] = auth
    return out


def server_dir(home: Path) -> Path:
    """``$SDS_HOME/prefect``: the server's database, record, log and lock (0700)."""
    return Path(home) / "prefect"


def _private_dir(home: Path) -> Path:
    """:func:`server_dir`, made if missing, 0700."""
    d = server_dir(home)
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    return d


def _open_private(path: Path, flags: int) -> int:
    """A descriptor of ``path``, created 0600 if missing."""
    return os.open(path, flags | os.O_CREAT, 0o600)


def make_home_private(home: Path) -> str | None:
    """Tighten a home made before homes were private: the home 0700 and everything under
    ``prefect/`` owner-only (its database holds every run's parameters, logs and artifacts);
    when the home itself was open, also its releases, private workspace and ledger
    (:func:`~sds_release.store.workspace.home.make_home_folders_private`; a home that is
    already 0700 is not walked again). A one-line note of what changed, or None when nothing
    was readable."""
    home = Path(home)
    before = os.stat(home).st_mode
    changed = make_private(home)
    inside = (
        make_home_folders_private(home) if changed else make_private(server_dir(home), tree=True)
    )
    if not changed and not inside:
        return None
    what = f"the home {home} (was {before & 0o777:o}, now 700)" if changed else ""
    server = [p for p in inside if p == server_dir(home) or server_dir(home) in p.parents]
    if server:
        what += (" and " if what else "") + (
            f"{len(server)} files and folders of its Prefect server under "
            f"{server_dir(home)} (database, logs)"
        )
    if len(inside) > len(server):
        what += (" and " if what else "") + (
            f"{len(inside) - len(server)} of its releases, private workspace and ledger"
        )
    return f"made {what} private to their owner: other local accounts could read them"


@contextlib.contextmanager
def _locked(home: Path) -> Iterator[None]:
    fd = _open_private(_private_dir(home) / "server.lock", os.O_RDWR)
    with os.fdopen(fd, "r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs: an ended child of this process (a zombie until reaped,
    e.g. the supervisor that :func:`start` launched) is reaped and counts as ended, so a
    server that never came up is reported at once instead of after the whole wait."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:  # not our child
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def healthy(port: int, timeout: float = 2.0, home: Path | None = None) -> bool:
    """Whether a Prefect server answers on ``port``; with ``home``, whether it is *that home's*
    server: it must accept the home's credential on an authenticated endpoint. (Another home's
    server, or any other, that took the port first answers 401 and is not mistaken for ours.)
    """
    import base64

    auth = None if home is None else api_auth(home)
    path = "/api/health" if auth is None else "/api/admin/version"
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if auth is not None:
        token = base64.b64encode(auth.encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return bool(r.status == 200)
    except OSError:  # refused, timed out, or an HTTPError (401: not this home's server)
        return False


def read_record(home: Path) -> ServerInfo | None:
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
    info = read_record(home)
    if info is None:
        return None
    if not alive(info.pid):
        with contextlib.suppress(OSError):
            (server_dir(home) / STATE_FILE).unlink()
        return None
    return ServerInfo(**{**asdict(info), "healthy": healthy(info.port, home=Path(home))})


PORT_CLAIM = Path(os.environ.get("TMPDIR", "/tmp")) / f"sds-port-{PREFERRED_PORT}.claim"
"""Machine-wide claim on :data:`PREFERRED_PORT`: a server binds its port only after Prefect's
start-up (seconds), so two homes starting at once could both find it free and the second
server would fail ("Reactive triggers not started"). The claim (the claiming process and
time, under an exclusive lock) sends other starts to any free port for :data:`CLAIM_S`."""
CLAIM_S = 300.0


def _free_port() -> int:
    """:data:`PREFERRED_PORT` when free and not claimed by another start, else any free port."""
    lock = PORT_CLAIM.with_suffix(".lock")
    try:
        handle = open(lock, "a")  # held for the lock's duration below
    except OSError:  # an unwritable temporary directory: no claim, as before
        handle = None
    try:
        if handle is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        ports = [0] if _claimed() else [PREFERRED_PORT, 0]
        for port in ports:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
                chosen = int(s.getsockname()[1])
            if chosen == PREFERRED_PORT and handle is not None:
                with contextlib.suppress(OSError):
                    PORT_CLAIM.write_text(json.dumps({"pid": os.getpid(), "at": time.time()}))
            return chosen
        raise OSError("no free TCP port on 127.0.0.1")  # pragma: no cover - bind(0) never fails
    finally:
        if handle is not None:
            handle.close()  # releases the lock


def _claimed() -> bool:
    """Whether another live process claimed :data:`PREFERRED_PORT` in the last :data:`CLAIM_S`."""
    try:
        claim = json.loads(PORT_CLAIM.read_text())
        pid, at = int(claim["pid"]), float(claim["at"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return pid != os.getpid() and time.time() - at < CLAIM_S and alive(pid)


def start(
    home: Path,
    *,
    idle_timeout_s: float | None = None,
    port: int | None = None,
    runner_after: int | None = None,
) -> ServerInfo:
    """Start the home's server in the background (or return the running one); no waiting.

    The supervisor, the server and the warm runner run with the umask 077 (what they write is
    0600, their folders 0700); a home made before homes were private is tightened first, said
    in one warning line.

    Args:
        home: the SDS home; the database is ``<home>/prefect/prefect.db``.
        idle_timeout_s: stop after this many seconds without a release (None: never).
        port: the port (default 4200 when free, else any free port).
        runner_after: start the release runner only once this process has ended (the release
            that starts the server runs in it); None: at once.
    """
    home = Path(home).absolute()
    with _locked(home):
        running = status(home)
        if running is not None:
            return running
        port = port or _free_port()
        note = make_home_private(home)
        if note is not None:
            from sds_release.flows.console import warn

            warn(note)
        api_auth(home, create=True)  # before the supervisor reads it
        d = server_dir(home)
        # handed to the detached process, closed here
        log = os.fdopen(_open_private(d / LOG_FILE, os.O_WRONLY | os.O_APPEND), "ab")
        try:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "sds_release.flows.local.supervisor",
                    "--home",
                    str(home),
                    "--port",
                    str(port),
                    *(["--idle-timeout", str(idle_timeout_s)] if idle_timeout_s else []),
                    *(["--runner-after", str(runner_after)] if runner_after else []),
                ],
                cwd=str(d),
                env=supervisor_env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # not killed with the terminal or the release's group
                umask=PRIVATE_UMASK,  # the supervisor's, its server's and its runner's files
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
        with os.fdopen(_open_private(d / STATE_FILE, os.O_WRONLY | os.O_TRUNC), "w") as f:
            f.write(json.dumps(record, indent=2) + "\n")
        touch(home)
        return info


def supervisor_env() -> dict[str, str]:
    """The environment of the supervisor: this one, with the project importable."""
    env = dict(os.environ)
    project = project_root()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [project, env.get("PYTHONPATH")]))
    return env


HEALTH_POLL_S = 0.05
"""How often :func:`wait_healthy` asks a starting server: the release that started it waits for
its first answer (a refused connection costs microseconds; 0.2 s lost 0.1 s on average)."""


def wait_healthy(info: ServerInfo, timeout: float = 300.0) -> ServerInfo:
    """Block until the server answers; raise ``RuntimeError`` with its log if it cannot start."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if healthy(info.port, home=Path(info.home)):
            return ServerInfo(**{**asdict(info), "healthy": True})
        if not alive(info.pid):
            break
        time.sleep(HEALTH_POLL_S)
    log = server_dir(Path(info.home)) / LOG_FILE
    tail = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
    what = (
        f"did not answer within {timeout:.0f} s"
        if alive(info.pid)
        else f"stopped before it answered (its supervisor, pid {info.pid}, exited)"
    )
    raise RuntimeError(
        f"the local Prefect server for {info.home} {what} (log {log}): {tail.strip()[-500:]}"
    )


def wait_runner(info: ServerInfo, timeout: float = 120.0) -> dict[str, object] | None:
    """Block until the home's release runner answers (it imports Prefect and the flow first);
    its ping answer, or None when it is disabled or did not come up (releases run in-process).

    A server started by an earlier version has its runner on the old socket name
    (:func:`~sds_release.flows.local.handoff.legacy_ping` answers): it never answers on the new
    one, so this returns None at once instead of waiting ``timeout``."""
    if not runner_enabled():
        return None
    end = time.monotonic() + timeout
    while time.monotonic() < end and alive(info.pid):
        answer = ping(Path(info.home))
        if answer is not None:
            return answer
        if legacy_ping(Path(info.home), timeout=0.5) is not None:
            return None
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
        while alive(info.pid) and time.monotonic() < end:
            time.sleep(0.1)
        if alive(info.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(info.pid, signal.SIGKILL)  # its own session: the server goes too
        with contextlib.suppress(OSError):
            (server_dir(home) / STATE_FILE).unlink()
        return info


def touch(home: Path) -> None:
    """Record that a release used the server now (the idle timeout counts from here)."""
    path = _private_dir(Path(home)) / LAST_USED_FILE
    path.touch(mode=0o600)
