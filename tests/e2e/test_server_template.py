"""The first release into a home without a running server: the home's database copied from the
template (what a server's start makes of a new database) and the warm runner held back until
that release has ended."""

from __future__ import annotations

import base64
import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from sds_release.flows.local import server as local_server
from sds_release.flows.local import supervisor
from sds_release.flows.local import template as db_template
from sds_release.flows.local.handoff import ping
from sds_release.flows.local.server import AUTH_FILE
from tests.helpers import PROJECT

pytestmark = [pytest.mark.server, pytest.mark.slow]


def _env(**extra: str) -> dict[str, str]:
    drop = ("PREFECT_API_URL", "SDS_SERVER", "SDS_RUNNER", "SDS_WORKER", db_template.TEMPLATE_ENV)
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def _sds(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sds_release.flows.cli", *args],
        cwd=PROJECT,
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _lines(sql: str | None) -> list[str]:
    """A CREATE statement's lines, sorted: Alembic's batch migrations re-create some tables with
    their constraints in an order that differs from one run of the migrations to the next."""
    return sorted(line.strip().rstrip(",") for line in (sql or "").splitlines())


def _schema(db: Path) -> dict[str, object]:
    """What migrations and block registration leave: the schema, the migration head, the
    registered block types and schemas (ids and timestamps differ between two builds)."""
    with sqlite3.connect(db) as c:
        return {
            "schema": sorted(
                (t, n, _lines(sql))
                for t, n, sql in c.execute("SELECT type, name, sql FROM sqlite_master")
            ),
            "alembic": c.execute("SELECT version_num FROM alembic_version").fetchall(),
            "block_types": sorted(c.execute("SELECT slug, name FROM block_type").fetchall()),
            "block_schemas": sorted(
                c.execute("SELECT checksum, version FROM block_schema").fetchall()
            ),
        }


def _post(url: str, body: dict, home: Path | None = None) -> list[dict]:
    """POST to the API, with the home's credential (the home's server requires it)."""
    headers = {"Content-Type": "application/json"}
    if home is not None:
        token = base64.b64encode((home / AUTH_FILE).read_text().strip().encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def _children(pid: int) -> list[str]:
    """The command lines of ``pid``'s live children."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(cmd)
    return out


def test_template_is_what_a_server_start_makes(
    tmp_path: Path, tiny_csv: Path, tiny_config: Path
) -> None:
    """The template equals the database a server migrates itself; a new home gets a copy, its
    server answers, and a release's run and artifacts reach it."""
    cache = tmp_path / "cache"
    built = subprocess.run(  # as `make setup` under the umask 000: the folders are 0700 still
        [sys.executable, "-m", "sds_release.flows.local.template"],
        cwd=PROJECT,
        env=_env(**{db_template.TEMPLATE_ENV: str(cache)}),
        capture_output=True,
        text=True,
        timeout=600,
        umask=0,
    )
    assert built.returncode == 0, built.stderr
    (template,) = [p for p in cache.iterdir() if not p.name.startswith(".")]
    assert sorted(p.name for p in template.iterdir()) == ["memo_store.toml", "prefect.db"]
    open_to_others = [p for p in (cache, *cache.rglob("*")) if p.stat().st_mode & 0o077]
    assert open_to_others == []  # another account could replace what new homes copy

    own = tmp_path / "own"  # no template: the server migrates and registers itself
    started = _sds("server", "start", "--home", str(own), "--port", str(_free_port()),
                   SDS_RUNNER="off", **{db_template.TEMPLATE_ENV: "off"})  # fmt: skip
    assert started.returncode == 0, started.stderr
    _sds("server", "stop", "--home", str(own))
    assert _schema(template / "prefect.db") == _schema(own / "prefect" / "prefect.db")

    home, port = tmp_path / "home", _free_port()
    env = {db_template.TEMPLATE_ENV: str(cache), "SDS_RUNNER": "off"}
    started = _sds("server", "start", "--home", str(home), "--port", str(port), **env)
    assert started.returncode == 0, started.stderr
    try:
        log = (home / "prefect" / "server.log").read_text()
        assert f"database copied from {template}" in log
        assert (home / "prefect" / "memo_store.toml").read_text() == (
            template / "memo_store.toml"
        ).read_text()
        done = _sds("release", str(tiny_csv), "--config", str(tiny_config), "--home", str(home),
                    "--quiet", **env)  # fmt: skip
        assert done.returncode == 0, done.stderr
        release_id = Path(done.stdout.strip().splitlines()[-1]).name
        api = f"http://127.0.0.1:{port}/api"
        runs = _post(f"{api}/flow_runs/filter", {}, home)
        assert [r["state_type"] for r in runs if r["name"] == f"release-{release_id}"] == [
            "COMPLETED"
        ]
        assert {"release-tiny", "privacy-spend-tiny"} <= {
            a["key"] for a in _post(f"{api}/artifacts/filter", {}, home)
        }
    finally:
        _sds("server", "stop", "--home", str(home))
    assert (
        _schema(home / "prefect" / "prefect.db")["schema"]
        == _schema(template / "prefect.db")["schema"]
    )


def test_template_off_and_user_database_are_respected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``SDS_PREFECT_TEMPLATE=off`` or a database the user chose: no template, no copy."""
    monkeypatch.setenv(db_template.TEMPLATE_ENV, str(tmp_path / "cache"))
    assert db_template.template_dir() is not None
    monkeypatch.setenv("PREFECT_API_DATABASE_CONNECTION_URL", "postgresql+asyncpg://u@h/db")
    assert db_template.template_dir() is None
    monkeypatch.delenv("PREFECT_API_DATABASE_CONNECTION_URL")
    monkeypatch.setenv(db_template.TEMPLATE_ENV, "off")
    assert db_template.template_dir() is None


def test_runner_waits_for_the_release_that_started_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server started for a release (``runner_after``) answers without a runner while that
    process lives; its runner starts once the process has ended."""
    home = tmp_path / "home"
    monkeypatch.delenv("SDS_RUNNER", raising=False)
    monkeypatch.delenv("SDS_WORKER", raising=False)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    info = local_server.start(home, port=_free_port(), runner_after=holder.pid)
    try:
        local_server.wait_healthy(info, timeout=300)
        time.sleep(3 * supervisor._POLL_S)  # a few of the supervisor's rounds
        children = _children(info.pid)
        assert len(children) == 1 and "uvicorn" in children[0], children
        assert ping(home) is None
        holder.kill()
        holder.wait()
        assert local_server.wait_runner(info, timeout=300) is not None
        assert any("sds_release.flows.local.runner" in c for c in _children(info.pid))
    finally:
        holder.kill()
        local_server.stop(home)
