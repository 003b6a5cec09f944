"""`sds server start|status|stop` and releases that reuse (or start) the home's local server."""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from flows.local.server import AUTH_FILE
from tests.helpers import PROJECT

pytestmark = [pytest.mark.server, pytest.mark.slow]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "SDS_SERVER")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT), env.get("PYTHONPATH")]))
    return env


def _sds(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flows.cli", *args],
        cwd=PROJECT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(url: str, body: dict, home: Path | None = None) -> list[dict]:
    """POST to the API, with the home's credential (the home's server requires it)."""
    headers = {"Content-Type": "application/json"}
    if home is not None:
        token = base64.b64encode((home / AUTH_FILE).read_text().strip().encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def _wait_gone(pid: int, port: int, timeout: float = 90) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            if not _answers(port):
                return
        time.sleep(0.5)
    raise AssertionError(f"server (supervisor {pid}, port {port}) still running")


def _release(home: Path, tiny_csv: Path, tiny_config: Path) -> subprocess.CompletedProcess[str]:
    return _sds(
        "release", str(tiny_csv), "--config", str(tiny_config), "--home", str(home), "--quiet"
    )


def test_start_reuse_stop(tmp_path: Path, tiny_csv: Path, tiny_config: Path) -> None:
    """A started server serves the UI, a release runs on it (its run and artifacts visible
    there, no new server), and stop ends it."""
    home, port = tmp_path / "home", _free_port()
    assert _sds("server", "status", "--home", str(home)).returncode == 1
    started = _sds("server", "start", "--home", str(home), "--port", str(port))
    assert started.returncode == 0, started.stderr
    assert f"http://127.0.0.1:{port}" in started.stdout and "sds server stop" in started.stdout
    try:
        status = _sds("server", "status", "--home", str(home))
        assert status.returncode == 0 and status.stdout.startswith("answering")
        # the API needs the home's credential: printed for a shell, kept 0600 in private/
        auth = (home / AUTH_FILE).read_text().strip()
        assert (home / AUTH_FILE).stat().st_mode & 0o777 == 0o600
        assert f"PREFECT_API_AUTH_STRING={auth}" in status.stdout.splitlines()
        with pytest.raises(urllib.error.HTTPError) as refused:
            _post(f"http://127.0.0.1:{port}/api/flow_runs/filter", {})
        assert refused.value.code == 401
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as r:
            assert b"<html" in r.read().lower()  # the Prefect UI
        done = _release(home, tiny_csv, tiny_config)
        assert done.returncode == 0, done.stderr
        assert "started a" not in done.stderr  # reused
        release_id = Path(done.stdout.strip().splitlines()[-1]).name
        api = f"http://127.0.0.1:{port}/api"
        runs = _post(f"{api}/flow_runs/filter", {}, home)
        assert [r["state_type"] for r in runs if r["name"] == f"release-{release_id}"] == [
            "COMPLETED"
        ]
        keys = {a["key"] for a in _post(f"{api}/artifacts/filter", {}, home)}
        assert {"release-tiny", "privacy-spend-tiny", "noise-tiny"} <= keys
    finally:
        info = json.loads((home / "prefect" / "server.json").read_text())
        stopped = _sds("server", "stop", "--home", str(home))
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    _wait_gone(info["pid"], port)
    assert _sds("server", "status", "--home", str(home)).returncode == 1


def test_release_starts_a_server_that_stops_with_its_home(
    tmp_path: Path, tiny_csv: Path, tiny_config: Path
) -> None:
    """Without any server a release starts one, says so and how to stop it; it outlives the
    release, and its supervisor stops it when the home is removed."""
    home = tmp_path / "home"
    done = _release(home, tiny_csv, tiny_config)
    info = json.loads((home / "prefect" / "server.json").read_text())
    try:
        assert done.returncode == 0, done.stderr
        assert "started a Prefect server for" in done.stderr
        assert f"sds server stop --home {home}" in " ".join(done.stderr.split())
        assert info["idle_timeout_s"] == 3600
        assert _answers(info["port"])
        again = _sds("server", "status", "--home", str(home))
        assert again.returncode == 0
    finally:
        shutil.rmtree(home)
    _wait_gone(info["pid"], info["port"])
