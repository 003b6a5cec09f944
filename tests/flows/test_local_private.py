"""The home's Prefect server keeps its files private and its pages on the machine: an old home
is tightened when its server starts, the server's own files are 0600, the supervisor starts with
the umask 077, and every response carries a Content Security Policy naming no other host.

The real server, releases, another account and a browser: tests/e2e/test_local_server.py.
"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any, ClassVar

import pytest

from sds_release.flows.local import server as local_server
from sds_release.flows.local import supervisor
from sds_release.flows.local.webapp import CONTENT_SECURITY_POLICY, with_policy


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


class _FakeSupervisor:
    """What ``subprocess.Popen`` returns for the supervisor: the arguments it was given."""

    calls: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, args: list[str], **kwargs: Any) -> None:
        self.pid = os.getpid()
        _FakeSupervisor.calls.append({"args": args, **kwargs})


@pytest.fixture
def old_home(tmp_path: Path) -> Path:
    """A home as homes were made before: 0755, prefect/ 0755, its files 0644."""
    home = tmp_path / "home"
    prefect = home / "prefect"
    (prefect / "storage").mkdir(parents=True)
    for name in ("prefect.db", "prefect.db-wal", "server.log", "storage/result"):
        (prefect / name).write_text("runs, parameters, logs")
        (prefect / name).chmod(0o644)
    for folder in (home, prefect, prefect / "storage"):
        folder.chmod(0o755)
    return home


def test_an_old_home_is_made_private_when_its_server_starts(
    old_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Starting the server of a home made 0755 with a 0644 database tightens the home and
    everything under prefect/ (0700/0600), says so in one warning line, starts the supervisor
    with the umask 077 and writes the server's own files 0600, even under the umask 022."""
    monkeypatch.setattr(local_server.subprocess, "Popen", _FakeSupervisor)
    _FakeSupervisor.calls.clear()
    old = os.umask(0o022)
    try:
        local_server.start(old_home, port=4999)
    finally:
        os.umask(old)
    warning = capsys.readouterr().err.strip()
    assert len(warning.splitlines()) == 1
    assert warning.startswith(f"sds: warning: made the home {old_home} (was 755, now 700)")
    assert "and 6 files and folders of its Prefect server" in warning
    assert "other local accounts could read them" in warning
    assert [call["umask"] for call in _FakeSupervisor.calls] == [0o077]
    prefect = old_home / "prefect"
    paths = [old_home, *prefect.rglob("*")]
    assert {"server.json", "server.lock", "server.last-used", "prefect.db"} <= {
        p.name for p in paths
    }
    for path in paths:
        assert _mode(path) == (0o700 if path.is_dir() else 0o600), path


def test_a_private_home_starts_without_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A home that is already private (as resolve_home makes one) gets no warning."""
    monkeypatch.setattr(local_server.subprocess, "Popen", _FakeSupervisor)
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    local_server.start(home, port=4999)
    assert capsys.readouterr().err == ""
    assert local_server.make_home_private(home) is None


def test_the_server_runs_prefects_app_behind_the_policy_with_its_ui_in_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uvicorn's factory is sds_release.flows.local.webapp's; the UI bundles go to the user's cache,
    not into the installed package, unless the user chose a folder."""
    command = supervisor._server_command(4999)
    assert command[command.index("--factory") + 1] == "sds_release.flows.local.webapp:create_app"
    monkeypatch.setattr(supervisor, "_auth", lambda home: "sds:x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(supervisor.UI_STATIC_ENV, raising=False)
    env = supervisor._server_env(tmp_path / "home", 4999)
    assert env[supervisor.UI_STATIC_ENV] == str(tmp_path / "cache" / "sds" / "prefect-ui")
    monkeypatch.setenv(supervisor.UI_STATIC_ENV, "/srv/ui")
    assert supervisor._server_env(tmp_path / "home", 4999)[supervisor.UI_STATIC_ENV] == "/srv/ui"


def _respond(app: Any, scope_type: str, headers: list[tuple[bytes, bytes]]) -> list[dict]:
    """Run ``app`` wrapped in the policy once; the messages it sent."""
    sent: list[dict] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"<html>"})

    async def receive() -> dict:
        return {"type": "http.request"}

    async def send(message: Any) -> None:
        sent.append(dict(message))

    asyncio.run(with_policy(inner)({"type": scope_type}, receive, send))
    return sent


def test_every_http_response_carries_the_policy() -> None:
    """Every HTTP response gets the policy (one the app set is replaced); other traffic
    (lifespan, WebSocket) passes unchanged."""
    old = [(b"content-type", b"text/html"), (b"Content-Security-Policy", b"default-src *")]
    start = _respond(None, "http", old)[0]
    policies = [v for k, v in start["headers"] if k.lower() == b"content-security-policy"]
    assert policies == [CONTENT_SECURITY_POLICY.encode()]
    assert (b"content-type", b"text/html") in start["headers"]
    assert _respond(None, "lifespan", old)[0]["headers"] == old


def test_the_policy_names_no_other_host() -> None:
    """Every source the policy allows is this server or the page itself ('self', data:,
    blob:): no host, no scheme a page could reach another machine with."""
    directives = dict(d.split(" ", 1) for d in CONTENT_SECURITY_POLICY.split("; "))
    assert directives["default-src"] == "'self'" and directives["connect-src"] == "'self'"
    sources = {s for value in directives.values() for s in value.split()}
    assert sources <= {"'self'", "'none'", "'unsafe-eval'", "'unsafe-inline'", "data:", "blob:"}
