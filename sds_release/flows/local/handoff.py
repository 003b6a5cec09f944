"""Handing a release to the home's warm release runner (:mod:`sds_release.flows.local.runner`): the
client side.

Once its options are read, ``sds release``/``sds resume`` (a process that has not imported Prefect)
connects to ``$SDS_HOME/prefect/runner.sock``, sends the release's call, its environment and
working directory with its stdin/stdout/stderr descriptors, and waits for the exit status of the
child the runner forks for it. Signals the client gets are forwarded to the child's process group.
No runner, a refusal, ``SDS_RUNNER=off`` or a platform without the calls the runner makes
(:func:`runner_available`): the caller runs the release in-process. Only the standard library
(and :mod:`sds_release.store.run.timing`, which imports nothing else) is imported here.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sds_release.store.run.timing import mark
from sds_release.store.workspace.source_tree import project_root

__all__ = [
    "IMPORT_TIME_PREFIXES",
    "LEGACY_RUNNER_ENV",
    "LEGACY_SOCKET_NAME",
    "PROTOCOL",
    "RUNNER_ENV",
    "SOCKET_NAME",
    "hand_off",
    "ignored_signals",
    "import_time_env",
    "legacy_ping",
    "ping",
    "runner_available",
    "runner_enabled",
    "runner_identity",
    "socket_path",
]

SOCKET_NAME = "runner.sock"
LEGACY_SOCKET_NAME = "worker.sock"
"""The socket of a runner started by an earlier version (the runner was then called the worker).
Nothing hands a release to it: a client connects to :data:`SOCKET_NAME` only, so a server started
by an earlier version serves this version's releases in-process until it is restarted."""
RUNNER_ENV = "SDS_RUNNER"
"""``off`` disables the runner: the supervisor does not start one and releases run in-process."""
LEGACY_RUNNER_ENV = "SDS_WORKER"
"""The deprecated name of :data:`RUNNER_ENV`, read when that is not set (one line on stderr)."""
_legacy_warned = False
IMPORT_TIME_PREFIXES = (
    "PREFECT_",
    "GX_",
    "NUMBA_",
    "OMP_",
    "OPENBLAS_",
    "MKL_",
    "ARROW_",
    "DO_NOT_TRACK",
    "PYTHONHASHSEED",
)
"""Variables read when Prefect, GX, numba, numpy or pyarrow are imported (or settings are first
built): the runner imported them with its own values, so a client whose values differ in any of
them runs in-process instead."""
_MAX_MESSAGE = 1 << 20
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
STOP_GRACE_S = 60.0
"""How long a release whose runner died gets, after SIGTERM, to record its failure."""


def socket_path(home: Path) -> Path:
    """``$SDS_HOME/prefect/runner.sock`` (mode 0600)."""
    return Path(home) / "prefect" / SOCKET_NAME


def runner_available() -> bool:
    """Whether this platform has every call the warm runner makes: ``fork``, file descriptors
    passed over an ``AF_UNIX``/``SOCK_SEQPACKET`` socket, ``pidfd_open`` and ``/proc`` (Linux).
    Elsewhere the supervisor starts no runner and every release runs in-process."""
    return (
        sys.platform.startswith("linux")
        and hasattr(os, "fork")
        and hasattr(os, "pidfd_open")
        and hasattr(socket, "send_fds")
        and hasattr(socket, "SOCK_SEQPACKET")
        and Path("/proc/self/task").is_dir()
    )


def runner_enabled(env: dict[str, str] | os._Environ[str] | None = None) -> bool:
    """False when ``SDS_RUNNER=off`` or the platform cannot run the warm runner.

    Without ``SDS_RUNNER``, its deprecated name ``SDS_WORKER`` is read, and the first time this
    process reads it, one line on stderr says to use ``SDS_RUNNER``."""
    global _legacy_warned
    env = os.environ if env is None else env
    value = env.get(RUNNER_ENV)
    if value is None and LEGACY_RUNNER_ENV in env:
        value = env[LEGACY_RUNNER_ENV]
        if not _legacy_warned:
            _legacy_warned = True
            sys.stderr.write(
                f"sds: warning: {LEGACY_RUNNER_ENV} is deprecated and will be removed: set "
                f"{RUNNER_ENV}={value.strip()} instead (the home's warm release runner)\n"
            )
            sys.stderr.flush()
    return (value or "auto").strip().lower() not in ("off", "0", "false", "no") and (
        runner_available()
    )


def import_time_env(env: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """The variables of ``env`` that must be equal in the runner and the client."""
    return {k: v for k, v in env.items() if k.startswith(IMPORT_TIME_PREFIXES)}


PROTOCOL = 2
"""The hand-off's version. 2: ``sds release``'s pre-flight is left to the child when the call
says ``checks``. A runner started before a change of protocol still runs the old code, so it
must not take a call it would misread: the version is part of :func:`runner_identity`, which
the runner compares with the client's (a runner of protocol 1 compares the bare
:func:`project_root` and refuses), and the client then runs the release itself."""


def runner_identity() -> str:
    """What a client and its runner must agree on: the source tree and the protocol."""
    return f"{project_root()} (hand-off protocol {PROTOCOL})"


def _connect(home: Path, timeout: float, name: str = SOCKET_NAME) -> socket.socket | None:
    path = Path(home) / "prefect" / name
    if not path.exists():
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.settimeout(timeout)
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None
    return sock


def ping(home: Path, timeout: float = 2.0) -> dict[str, Any] | None:
    """The runner's answer to a ping (``pid``, ``api_url``, ``project``), or None."""
    return _ping(home, timeout, SOCKET_NAME)


def legacy_ping(home: Path, timeout: float = 2.0) -> dict[str, Any] | None:
    """The answer of an earlier version's runner (on :data:`LEGACY_SOCKET_NAME`), or None."""
    return _ping(home, timeout, LEGACY_SOCKET_NAME)


def _ping(home: Path, timeout: float, name: str) -> dict[str, Any] | None:
    sock = _connect(home, timeout, name)
    if sock is None:
        return None
    with sock:
        try:
            sock.send(json.dumps({"op": "ping"}).encode())
            answer = json.loads(sock.recv(_MAX_MESSAGE) or b"null")
        except (OSError, ValueError):
            return None
    return answer if isinstance(answer, dict) and answer.get("pid") else None


def ignored_signals() -> list[int]:
    """The forwarded signals this process ignores (e.g. SIGINT of a background job): the child
    ignores them too, as this process would have while running the release."""
    return [int(s) for s in _FORWARDED if signal.getsignal(s) is signal.SIG_IGN]


@contextlib.contextmanager
def _forwarding(pgid: int) -> Iterator[None]:
    """Forward the signals this process gets (Ctrl-C, SIGTERM, hang-up) to the child's group."""

    def forward(signum: int, frame: object) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signum)

    ignored = ignored_signals()
    previous = {s: signal.signal(s, forward) for s in _FORWARDED if s not in ignored}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def hand_off(home: Path, call: dict[str, Any]) -> int | None:
    """Run the release ``call`` in a child of the home's runner; its exit status, or None.

    None (nothing started, run in-process) when the runner is disabled, absent, not answering
    or refuses (another source tree, other import-time variables). Once the runner has forked
    the child, this process only waits: if it dies, the runner kills the child; if the runner
    dies, this process stops the child (:func:`_runner_lost`).
    """
    if not runner_enabled():
        return None
    sock = _connect(home, timeout=5.0)
    if sock is None:
        return None
    with sock:
        request = {
            "op": "release",
            "project": runner_identity(),
            "cwd": os.getcwd(),
            "ignored_signals": ignored_signals(),
            "env": dict(os.environ),
            "call": call,
        }
        try:
            mark("client:handoff")
            socket.send_fds(sock, [json.dumps(request).encode()], [0, 1, 2])
            answer = json.loads(sock.recv(_MAX_MESSAGE) or b"{}")
        except (OSError, ValueError):
            return None
        if "pid" not in answer:
            return None  # refused (answer["refused"] says why) or the runner went away
        mark("client:forked")
        child = int(answer["pid"])
        pidfd = _pidfd(child)  # watchable even once the runner is gone
        sock.settimeout(None)
        with _forwarding(child):
            try:
                done = json.loads(sock.recv(_MAX_MESSAGE) or b"{}")
            except (OSError, ValueError):
                done = {}
            mark("client:exit-status")
    if "exit" in done:
        if pidfd is not None:
            os.close(pidfd)
        return int(done["exit"])
    return _runner_lost(child, pidfd, str(call.get("params", {}).get("release_id", "RELEASE_ID")))


def _pidfd(pid: int) -> int | None:
    """A descriptor that turns readable when process ``pid`` ends, or None (already gone)."""
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None


def _ended(pidfd: int, timeout: float) -> bool:
    """Whether the process of ``pidfd`` has ended within ``timeout`` seconds."""
    return bool(select.select([pidfd], [], [], timeout)[0])


def _runner_lost(child: int, pidfd: int | None, release_id: str) -> int:
    """The runner died (SIGKILL, a crash) while its child ``child`` ran the release: stop the
    child before returning, so the release is not still running (and publishing) when the user
    resumes it, and say how to continue; the exit status.

    The child gets SIGTERM and ``STOP_GRACE_S`` to record its failure and say itself how to
    continue (its stderr is ours: :func:`sds_release.flows.local.launch` prints it); a child that is
    already gone or must be killed leaves that to this process.
    """
    resume = f"continue it with `sds resume {release_id}`"
    try:
        if pidfd is not None and not _ended(pidfd, 0):
            os.write(
                2,
                f"sds: warning: the home's release runner ended while it ran release "
                f"{release_id} (killed, or its server stopped); stopping the release\n".encode(),
            )
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child, signal.SIGTERM)
            if _ended(pidfd, STOP_GRACE_S):
                return 128 + signal.SIGTERM  # it said how to continue (or it completed)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child, signal.SIGKILL)
            _ended(pidfd, STOP_GRACE_S)
    finally:
        if pidfd is not None:
            os.close(pidfd)
    message = (
        f"sds: error: release {release_id} failed: the release runner stopped during the "
        f"release; {resume}\n"
    )
    os.write(2, message.encode())
    return 1
