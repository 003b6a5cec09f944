"""The warm release runner: Prefect, GX glue and the release flow imported once, a fork per release.

The home's server supervisor (:mod:`sds_release.flows.local.supervisor`) starts ``python -m
sds_release.flows.local.runner`` next to the Prefect server (only where
:func:`sds_release.flows.local.handoff.runner_available`: Linux). It imports what ``sds release``
would import (Prefect pointed at that server), checks that it runs no thread besides its own, and
listens on ``runner.sock`` (0600) in the server directory. Each release handed over by
:mod:`sds_release.flows.local.handoff` gets a forked child
with the client's stdin/stdout/stderr, environment and working directory, which runs the release
as :func:`sds_release.flows.local.launch.launch` runs it in-process and exits; the runner sends back
its exit status and kills the child if the client goes away.

Fork safety: the rules a fork without ``exec`` relies on, each enforced where it is written:

1. one OS thread at every fork (``_threads``: checked after the imports in :func:`serve` and
   before each fork in :meth:`Runner.refusal`); the loop is one ``selectors`` loop, no thread;
2. no library thread pool alive at the fork: OpenBLAS shuts its pool down in its atfork handler
   (one fork at warm-up makes that happen once), pyarrow's jemalloc purges inline
   (``JE_ARROW_MALLOC_CONF``), GX is imported here so the child starts no GX process;
3. the client's import-time variables equal the runner's (``import_time_env``), so the modules
   imported before the fork are the ones the client would have imported;
4. everything that can fail is checked before the fork, so the parent never has a child it cannot
   track (``pidfd_open`` is tested at start, in :func:`serve`);
5. the forwarded signals are blocked across the fork and unblocked in the child only once it is
   the release process; the child never returns into the loop (``os._exit``) and closes every
   descriptor of the other releases and of the listener.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import selectors
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sds_release.flows.console import freeze_heap_at_exit
from sds_release.flows.local.handoff import import_time_env, runner_identity, socket_path
from sds_release.store.run.timing import mark
from sds_release.store.workspace.home import private_umask

__all__ = ["main", "serve"]

_MAX_MESSAGE = 1 << 20
_POLL_S = 1.0
_STOP_GRACE_S = 10.0
_FORWARDED = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}  # what the client forwards


def _log(message: str) -> None:
    """One line in the server log (no data, no counts: ids and process numbers only)."""
    print(f"{datetime.now(UTC).isoformat()} sds release runner: {message}", flush=True)


def _threads() -> list[str]:
    """The names of this process's OS threads (``/proc``): the runner forks only with one."""
    tasks = Path(f"/proc/{os.getpid()}/task")
    return [(t / "comm").read_text().strip() for t in sorted(tasks.iterdir())]


def warm_up(home: Path, api_url: str) -> None:
    """Import what a release imports, with the environment a client on this home computes."""
    # pyarrow's jemalloc would otherwise start a purging thread at import (the child purges
    # inline instead; the allocator and every result are the same)
    os.environ.setdefault("JE_ARROW_MALLOC_CONF", "background_thread:false")
    os.environ["PREFECT_API_URL"] = api_url
    os.environ.setdefault("PREFECT_HOME", str(Path(home) / "prefect"))
    from sds_release.flows.local.launch import prefect_environment

    prefect_environment(Path(home))
    # GX too: the child runs the gate's suites itself instead of spawning a process to import it
    import great_expectations.expectations  # noqa: F401
    import rich.console  # noqa: F401
    from great_expectations.data_context.types.base import ProgressBarsConfig  # noqa: F401

    import sds_release.flows.release
    import sds_release.store.run.progress  # noqa: F401
    from sds_core.marginals.warmup import load_kernels
    from sds_release.flows.local import launch  # what the child runs
    from sds_release.store.inputs import gx_suite  # noqa: F401

    load_kernels()  # numba's compiler + the count/aggregate/normalize kernels, for every fork
    launch.import_flow_call()

    # OpenBLAS (numpy's and scipy's copy) starts a thread pool at import and shuts it down
    # before every fork (its pthread_atfork handler); one fork now leaves the main thread only
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


@dataclass
class _Release:
    """One client's release: its connection and the forked child."""

    conn: socket.socket
    pid: int = 0
    pidfd: int = -1
    fds: list[int] = field(default_factory=list)


class Runner:
    """The accept loop: pings, refusals, one forked child per release."""

    def __init__(self, home: Path, api_url: str, listener: socket.socket) -> None:
        self.home = home
        self.api_url = api_url
        self.listener = listener
        self.env = import_time_env(os.environ)
        self.sel = selectors.DefaultSelector()
        self.sel.register(listener, selectors.EVENT_READ, None)
        self.releases: dict[int, _Release] = {}  # by connection fd
        self.stopping = False

    # -- requests -------------------------------------------------------------------------------
    def refusal(self, request: dict[str, Any]) -> str | None:
        """Why this runner must not run the request (None: it may)."""
        if request.get("project") != runner_identity():
            return f"the runner runs {runner_identity()}, the client {request.get('project')}"
        theirs = import_time_env(request.get("env") or {})  # rule 3
        keys = theirs.keys() | self.env.keys()
        differ = sorted(k for k in keys if theirs.get(k) != self.env.get(k))
        if differ:
            return f"import-time variables differ: {', '.join(differ)}"
        threads = _threads()  # rule 1
        if len(threads) != 1:
            return f"the runner runs {len(threads)} threads ({', '.join(threads)}); not forking"
        return None

    def accept(self) -> None:
        conn, _ = self.listener.accept()
        conn.setblocking(True)
        self.releases[conn.fileno()] = _Release(conn)
        self.sel.register(conn, selectors.EVENT_READ, "conn")

    def on_message(self, rel: _Release) -> None:
        try:
            data, fds, _, _ = socket.recv_fds(rel.conn, _MAX_MESSAGE, 3)
        except OSError:
            data, fds = b"", []
        rel.fds.extend(fds)
        if not data:  # the client went away
            self.client_gone(rel)
            return
        if rel.pid:
            return  # nothing more is expected from a running release's client
        try:
            request = json.loads(data)
        except ValueError:
            self.close(rel)
            return
        if request.get("op") == "ping":
            self.send(
                rel, {"pid": os.getpid(), "api_url": self.api_url, "project": runner_identity()}
            )
            self.close(rel)
            return
        reason = self.refusal(request) if len(rel.fds) == 3 else "no stdin/stdout/stderr given"
        if reason is not None or self.stopping:
            _log(f"refused a release: {reason or 'stopping'}")
            self.send(rel, {"refused": reason or "the runner is stopping"})
            self.close(rel)
            return
        self.fork(rel, request)

    def fork(self, rel: _Release, request: dict[str, Any]) -> None:
        # the client forwards Ctrl-C as soon as it has the pid: the child takes it once it is
        # the release process (a KeyboardInterrupt there, as in-process), not during its setup
        signal.pthread_sigmask(signal.SIG_BLOCK, _FORWARDED)  # rule 5
        pid = os.fork()
        if pid == 0:
            self.child(rel, request)  # never returns
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORWARDED)
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # also done in the child: whichever runs first
        for fd in rel.fds:
            os.close(fd)
        rel.fds.clear()
        rel.pid = pid
        rel.pidfd = os.pidfd_open(pid)
        self.sel.register(rel.pidfd, selectors.EVENT_READ, rel)
        self.send(rel, {"pid": pid})
        _log(f"release {request['call']['params'].get('release_id')} in child {pid}")

    def child(self, rel: _Release, request: dict[str, Any]) -> None:
        """In the forked child: become the client's release process, run it, exit."""
        code: int = 1
        try:
            os.setpgid(0, 0)
            for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
                signal.signal(s, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            for s in request.get("ignored_signals") or []:  # as the client had them
                signal.signal(s, signal.SIG_IGN)
            keep = set(rel.fds)
            for other in self.releases.values():
                if other.pidfd >= 0:
                    os.close(other.pidfd)
                for fd in other.fds:
                    if fd not in keep:
                        os.close(fd)
                other.conn.close()  # the runner's (and the client's) end stays the runner's
            self.listener.close()
            self.sel.close()
            for target, fd in enumerate(rel.fds):
                os.dup2(fd, target)
            for fd in rel.fds:
                if fd > 2:
                    os.close(fd)
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            mark("child:start")  # forked, its descriptors and environment the client's
            # the process's own streams, buffered as a fresh process would buffer them
            sys.stdin = open(0, closefd=False)
            sys.stdout = open(1, "w", buffering=1 if os.isatty(1) else -1, closefd=False)
            sys.stderr = open(2, "w", buffering=1, errors="backslashreplace", closefd=False)
            from sds_release.flows.console import quick_exit
            from sds_release.flows.local.launch import run_handed_off

            try:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORWARDED)
                code = run_handed_off(request["call"])
            except KeyboardInterrupt:  # before the release started: as typer ends it
                code = 130
            quick_exit(code)
        except BaseException:  # the child must never return into the loop
            with contextlib.suppress(BaseException):
                traceback.print_exc()
                sys.stderr.flush()
        os._exit(code or 1)

    # -- children and clients -------------------------------------------------------------------
    def on_exit(self, rel: _Release) -> None:
        _, status = os.waitpid(rel.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        self.send(rel, {"exit": code if code >= 0 else 128 - code})
        self.sel.unregister(rel.pidfd)
        os.close(rel.pidfd)
        rel.pidfd, rel.pid = -1, 0
        self.close(rel)

    def client_gone(self, rel: _Release) -> None:
        if rel.pid:
            _log(f"client of child {rel.pid} went away: killing the child")
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(rel.pid, signal.SIGKILL)
            self.sel.unregister(rel.conn)  # the child's exit is still reaped by its pidfd
            return
        self.close(rel)

    def send(self, rel: _Release, message: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            rel.conn.send(json.dumps(message).encode())

    def close(self, rel: _Release) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(rel.conn)
        for fd in rel.fds:
            os.close(fd)
        rel.fds.clear()
        self.releases.pop(rel.conn.fileno(), None)
        rel.conn.close()

    # -- the loop -------------------------------------------------------------------------------
    def run(self, supervisor: int) -> int:
        stop_at: float | None = None
        while True:
            if (self.stopping or os.getppid() != supervisor) and stop_at is None:
                self.stopping = True
                stop_at = time.monotonic() + _STOP_GRACE_S
                self.sel.unregister(self.listener)
                self.listener.close()
                for rel in list(self.releases.values()):
                    if rel.pid:
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.killpg(rel.pid, signal.SIGTERM)
                    else:
                        self.close(rel)
            if self.stopping:
                if not any(r.pid for r in self.releases.values()):
                    return 0
                if stop_at is not None and time.monotonic() > stop_at:
                    for rel in self.releases.values():
                        if rel.pid:
                            with contextlib.suppress(ProcessLookupError, PermissionError):
                                os.killpg(rel.pid, signal.SIGKILL)
            for key, _ in self.sel.select(timeout=_POLL_S):
                if key.data is None:
                    self.accept()
                elif key.data == "conn":
                    client = self.releases.get(key.fd)
                    if client is not None:
                        self.on_message(client)
                else:
                    self.on_exit(key.data)


def _listen(home: Path) -> socket.socket:
    path = socket_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(16)
    return sock


def serve(home: Path, api_url: str) -> int:
    """Warm up, then serve releases until SIGTERM or the supervisor's end; the exit status."""
    home = Path(home).absolute()
    supervisor = os.getppid()
    stop = {"now": False}

    def _stop(signum: int, frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, _stop)
    try:  # rule 4: the parent calls pidfd_open after every fork; it must not fail there
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError) as e:
        _log(f"not serving: pidfd_open is not available ({e})")
        return 1
    warm_up(home, api_url)
    threads = _threads()
    if len(threads) != 1:
        _log(f"not serving: {len(threads)} threads after the imports ({', '.join(threads)})")
        return 1
    listener = _listen(home)
    runner = Runner(home, api_url, listener)
    _log(f"ready on {socket_path(home)} (pid {os.getpid()})")
    signal.signal(signal.SIGTERM, lambda s, f: setattr(runner, "stopping", True))
    if stop["now"]:
        runner.stopping = True
    try:
        return runner.run(supervisor)
    finally:
        path = socket_path(home)
        with contextlib.suppress(OSError):
            if path.exists():
                path.unlink()
        _log("stopped")


def main(argv: list[str] | None = None) -> int:
    """``python -m sds_release.flows.local.runner --home H --api-url URL``: the release runner of a
    home."""
    ap = argparse.ArgumentParser(description="Serve the releases of an SDS home, warm.")
    ap.add_argument("--home", required=True, type=Path)
    ap.add_argument("--api-url", required=True)
    args = ap.parse_args(argv)
    freeze_heap_at_exit()
    with (
        private_umask()
    ):  # its socket; a release's child sets its own (sds_release.flows.local.launch)
        return serve(args.home, args.api_url)


if __name__ == "__main__":
    sys.exit(main())
