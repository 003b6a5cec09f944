"""The warm runner's names: ``SDS_RUNNER`` (``SDS_WORKER`` read as a deprecated alias, said once on
stderr), the socket ``runner.sock``, and a server started by an earlier version (its runner on
``worker.sock``) waited for by nobody."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sds_release.flows.cli.server import _runner_line
from sds_release.flows.local import handoff
from sds_release.flows.local.server import ServerInfo, wait_runner

pytestmark = pytest.mark.skipif(not handoff.runner_available(), reason="the runner needs Linux")


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither variable set, and no deprecation line said yet in this process."""
    monkeypatch.delenv("SDS_RUNNER", raising=False)
    monkeypatch.delenv("SDS_WORKER", raising=False)
    monkeypatch.setattr(handoff, "_legacy_warned", False)


def test_sds_runner_off_turns_the_runner_off(capsys: pytest.CaptureFixture[str]) -> None:
    """``SDS_RUNNER=off`` turns the runner off, unset leaves it on; neither says anything."""
    assert handoff.runner_enabled({}) is True
    for value in ("off", "0", "false", "no", " OFF "):
        assert handoff.runner_enabled({"SDS_RUNNER": value}) is False
    assert capsys.readouterr().err == ""


def test_sds_worker_is_a_deprecated_alias_said_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``SDS_WORKER=off`` still turns the runner off, with one deprecation line on stderr per
    process however often it is read; ``SDS_RUNNER`` wins over it and is not warned about."""
    monkeypatch.setenv("SDS_WORKER", "off")
    assert handoff.runner_enabled() is False
    assert handoff.runner_enabled() is False
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "sds: warning: SDS_WORKER is deprecated and will be removed: set SDS_RUNNER=off "
        "instead (the home's warm release runner)"
    ]
    monkeypatch.setattr(handoff, "_legacy_warned", False)
    assert handoff.runner_enabled({"SDS_RUNNER": "auto", "SDS_WORKER": "off"}) is True
    assert capsys.readouterr().err == ""


def test_the_runner_listens_on_runner_sock(tmp_path: Path) -> None:
    """The runner's socket is ``$SDS_HOME/prefect/runner.sock``."""
    assert handoff.socket_path(tmp_path) == tmp_path / "prefect" / "runner.sock"


@contextlib.contextmanager
def _earlier_runner(home: Path) -> Iterator[list[dict[str, object]]]:
    """A runner of an earlier version: answers pings on ``worker.sock``; yields the requests."""
    path = home / "prefect" / handoff.LEGACY_SOCKET_NAME
    path.parent.mkdir(parents=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(str(path))
    listener.listen(4)
    seen: list[dict[str, object]] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                seen.append(json.loads(conn.recv(1 << 16)))
                answer = {"pid": 424242, "api_url": "http://127.0.0.1:1/api", "project": "old"}
                conn.send(json.dumps(answer).encode())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(timeout=10)


def test_an_earlier_versions_runner_is_not_waited_for(tmp_path: Path) -> None:
    """A home whose server an earlier version started (its runner answers on ``worker.sock``):
    ``sds server start`` stops waiting as soon as that runner answers (it would never answer on
    ``runner.sock``) and says releases run in-process until the server is restarted."""
    home = tmp_path / "h"
    info = ServerInfo(str(home), 1, os.getpid(), "2026-01-01T00:00:00+00:00", None, True)
    with _earlier_runner(home) as seen:
        assert wait_runner(info, timeout=30) is None
        assert seen == [{"op": "ping"}]  # asked once, then not waited for
        line = _runner_line(home, None)
    assert line.startswith("release runner: this server was started by an earlier version")
    assert "`sds server stop` and `sds server start`" in line
    assert _runner_line(home, None) == "release runner: not running; releases run in-process"
