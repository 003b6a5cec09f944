"""The supervisor of a home's Prefect server: the server, the warm runner, the template build.

``python -m sds_release.flows.local.supervisor`` (started by
:func:`sds_release.flows.local.server.start`) runs the Prefect server (uvicorn) and the home's warm
release runner (:mod:`sds_release.flows.local.runner`) and watches them. It stops them on ``sds
server stop`` (SIGTERM), when the home's record of it (``server.json``) disappears, and, for a
server a release started on its own, after an idle time without releases. A server started by a
release starts its runner only once that release has ended (the release runs in-process and would
otherwise share the cores with the runner's imports). Once the runner is ready, a missing database
template is built in the background. The supervisor and its children run with the umask 077: what
they write in the home is private. The server is Prefect's application behind a Content Security
Policy (:mod:`sds_release.flows.local.webapp`), its UI bundles copied to the user's cache, not into
the package.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from sds_release.flows.local.handoff import ping, runner_enabled
from sds_release.flows.local.server import (
    AUTH_ENV,
    AUTH_FILE,
    LAST_USED_FILE,
    SERVER_SETTINGS,
    STATE_FILE,
    alive,
    api_auth,
    healthy,
    read_record,
    server_dir,
)
from sds_release.flows.local.template import (
    DB_URL,
    seed_database,
    start_template_build,
    template_dir,
    user_database,
)
from sds_release.store.run.timing import TIMING_ENV, mark
from sds_release.store.workspace.home import private_umask
from sds_release.store.workspace.source_tree import project_root

_POLL_S = 2.0
_TIMING_POLL_S = 0.05
"""With ``SDS_TIMING_FILE`` set (bench/bench_release.py only), how often the supervisor asks a
server that has not answered yet, so its mark ``supervisor:server-answered`` is that close."""


UI_STATIC_ENV = "PREFECT_UI_STATIC_DIRECTORY"


def _server_command(port: int) -> list[str]:
    app_dir = project_root()  # where the sds_release package is
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "--app-dir",
        app_dir,
        "--factory",
        "sds_release.flows.local.webapp:create_app",
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
    env["PREFECT_SERVER_API_AUTH_STRING"] = _auth(home)  # every request but /health needs it
    env.pop(AUTH_ENV, None)
    env.setdefault(UI_STATIC_ENV, str(ui_static_dir()))
    if not user_database():
        env["PREFECT_API_DATABASE_CONNECTION_URL"] = DB_URL  # the server runs in server_dir
    return env


def ui_static_dir() -> Path:
    """Where the home's server keeps the UI bundles it serves (Prefect copies them there once per
    version): this user's cache, ``$XDG_CACHE_HOME/sds/prefect-ui``. By default Prefect writes
    them into the installed package, where a server with the umask 077 would leave them
    unreadable to every other user of a shared installation (and a read-only one gets no UI)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "sds" / "prefect-ui"


def _log(message: str) -> None:
    """One line in the server log."""
    print(f"{datetime.now(UTC).isoformat()} sds server supervisor: {message}", flush=True)


def _start_server(home: Path, port: int) -> subprocess.Popen[bytes]:
    """The Prefect server (uvicorn) on ``port``, its database in the home."""
    env = _server_env(home, port)
    with contextlib.suppress(OSError):  # Prefect locks its UI copy in this folder's parent
        Path(env[UI_STATIC_ENV]).mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        _server_command(port),
        env=env,
        cwd=str(server_dir(home)),
        stdin=subprocess.DEVNULL,
    )


def _start_runner(home: Path, port: int) -> subprocess.Popen[bytes] | None:
    """The home's warm release runner (sds_release/flows/local/runner.py), unless
    ``SDS_RUNNER=off``."""
    if not runner_enabled():
        return None
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env[AUTH_ENV] = _auth(home)  # the runner is a client of the home's server
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sds_release.flows.local.runner",
            "--home",
            str(home),
            "--api-url",
            f"http://127.0.0.1:{port}/api",
        ],
        env=env,
        stdin=subprocess.DEVNULL,
    )


def _auth(home: Path) -> str:
    """The home's API credential (made by :func:`sds_release.flows.local.server.start` before
    us)."""
    value = api_auth(home, create=True)
    if value is None:  # pragma: no cover - the supervisor runs as the home's owner
        raise RuntimeError(f"cannot read the API credential {home / AUTH_FILE}")
    return value


def _stop_children(*children: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM to each live child at once, then wait for them all (30 s, then SIGKILL)."""
    live = [c for c in children if c is not None and c.poll() is None]
    for child in live:
        child.terminate()
    end = time.monotonic() + 30
    for child in live:
        try:
            child.wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


_NAP_S = 0.1
"""How often a supervisor between two rounds looks whether it was told to stop: ``sds server
stop`` waited up to a whole round (2 s) before the supervisor began to stop."""


def _nap(seconds: float, stopping: Callable[[], bool]) -> None:
    """Sleep ``seconds``, or less once ``stopping()`` is true (looked at every :data:`_NAP_S`)."""
    end = time.monotonic() + seconds
    while not stopping() and (left := end - time.monotonic()) > 0:
        time.sleep(min(left, _NAP_S))


def supervise(
    home: Path, port: int, idle_timeout_s: float | None, runner_after: int | None = None
) -> int:
    """Run the server and the release runner and watch them; returns the exit status (the
    supervisor's ``main``). The runner starts at once, or once the server answers and the
    process ``runner_after`` has ended; a runner that ends is not restarted (releases then run
    in-process). Once the runner is ready, a missing database template is built.

    A server that exits after it has answered (killed, crashed) is started again on the same
    port and database while the runner and the releases it runs go on (their Prefect clients
    retry until it answers again, see ``PREFECT_DEFAULTS`` in
    :mod:`sds_release.flows.local.launch`); one that exits before it ever answered ends the
    supervisor."""
    home = Path(home).absolute()
    mark("supervisor:start")
    if seed_database(home):
        _log(f"database copied from {template_dir()}")
    mark("supervisor:seeded")
    child = _start_server(home, port)
    mark("supervisor:server-spawned")
    answered = False  # whether the current server process has answered since it started
    restarted: float | None = None  # when it was last restarted
    runner = None if runner_after else _start_runner(home, port)
    runner_due = runner is None and runner_enabled()
    builder: subprocess.Popen[bytes] | None = None
    build_due = True
    stopping = False

    def _stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    grace = time.monotonic() + 30  # start() writes the record right after starting us
    while (rec := read_record(home)) is None or rec.pid != os.getpid():
        if time.monotonic() > grace or stopping:
            break
        time.sleep(0.1)
    reason = "stopped"
    while not stopping:
        # first, so a server that died with its home is not restarted (a new server on this
        # port could take it from another home's start)
        info = read_record(home)
        if info is None or info.pid != os.getpid():
            reason = "its record is gone (home removed or another server took over)"
            break
        if child.poll() is not None:
            if not answered:  # it never came up (port taken, database broken): give up
                reason = f"server exited with status {child.returncode} before it answered"
                break
            _log(  # killed or crashed: same port and database; the runner and its releases stay
                f"server exited with status {child.returncode}; restarting it on port {port}"
            )
            child, answered, restarted = _start_server(home, port), False, time.monotonic()
        if not answered and healthy(port, home=home):
            answered = True
            mark("supervisor:server-answered")
            if restarted is not None:
                _log(f"server answers again ({time.monotonic() - restarted:.0f} s after restart)")
        release_done = runner_after is None or not alive(runner_after)
        if runner_due and release_done and healthy(port, home=home):
            runner, runner_due = _start_runner(home, port), False
            mark("supervisor:runner-spawned")
        if build_due and not runner_due and (runner is None or ping(home) is not None):
            builder, build_due = start_template_build(), False
        if builder is not None and builder.poll() is not None:
            builder = None
        if runner is not None and runner.poll() is not None:
            _log(f"release runner exited with status {runner.returncode}; releases run in-process")
            runner = None
        if idle_timeout_s:
            try:
                idle = time.time() - (server_dir(home) / LAST_USED_FILE).stat().st_mtime
            except OSError:
                idle = idle_timeout_s + 1
            if idle > idle_timeout_s:
                reason = f"idle for {idle / 60:.0f} minutes"
                break
        timed = not answered and os.environ.get(TIMING_ENV)
        _nap(_TIMING_POLL_S if timed else _POLL_S, lambda: stopping)
    _stop_children(builder, runner)  # the runner may still tell the server of a run's end
    _stop_children(child)
    info = read_record(home)
    if info is not None and info.pid == os.getpid():
        with contextlib.suppress(OSError):
            (server_dir(home) / STATE_FILE).unlink()
    _log(reason)
    return 0 if reason == "stopped" or reason.startswith("idle") else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m sds_release.flows.local.supervisor --home H --port P [--idle-timeout S]
    [--runner-after PID]``: the supervisor of a home's server."""
    ap = argparse.ArgumentParser(description="Supervise the Prefect server of an SDS home.")
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--idle-timeout", type=float, default=None)
    ap.add_argument("--runner-after", type=int, default=None)
    args = ap.parse_args(argv)
    with private_umask():  # the server's database and log, the runner's socket: 0600
        return supervise(args.home, args.port, args.idle_timeout, args.runner_after)


if __name__ == "__main__":
    sys.exit(main())
