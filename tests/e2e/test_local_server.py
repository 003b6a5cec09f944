"""`sds server start|status|stop` and releases that reuse (or start) the home's local server;
a home whose server ran releases is private (tried as another account), and its UI makes no
request outside the machine (Chromium)."""

from __future__ import annotations

import base64
import json
import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from sds_release.flows.local.server import AUTH_FILE
from tests.helpers import PROJECT, system_chromium

pytestmark = [pytest.mark.server, pytest.mark.slow]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "SDS_SERVER")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT), env.get("PYTHONPATH")]))
    return env


def _sds(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sds_release.flows.cli", *args],
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


# -- a home whose server ran releases: private on disk, its UI on the machine ----------------------
@dataclass(frozen=True)
class ServedHome:
    """A home whose own server ran two releases (the first in-process as it started the server,
    the second in the warm runner's child) and holds the deployments of `sds deploy`."""

    home: Path
    port: int
    outside: Path  # a folder every account may enter, holding the home and a control file

    @property
    def base(self) -> str:
        """The UI's address."""
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture(scope="module")
def served(tiny_csv: Path, tiny_config: Path) -> Iterator[ServedHome]:
    """The home, in a folder others may enter (pytest's tmp_path is root's 0700, which would
    hide a readable home), with a world-readable control file beside it."""
    outside = Path(tempfile.mkdtemp(prefix="sds-served-home-"))
    outside.chmod(0o755)
    (outside / "control.txt").write_text("readable by everyone")
    (outside / "control.txt").chmod(0o644)
    home = outside / "home"
    try:
        first = _release(home, tiny_csv, tiny_config)  # starts the server, runs in-process
        assert first.returncode == 0, first.stderr[-3000:]
        assert "started a Prefect server for" in first.stderr
        warm = _sds("server", "start", "--home", str(home))  # waits for the warm runner
        assert "release runner: ready" in warm.stdout, warm.stdout + warm.stderr
        second = _release(home, tiny_csv, tiny_config)
        assert second.returncode == 0, second.stderr[-3000:]
        second_id = Path(second.stdout.strip().splitlines()[-1]).name
        log = (home / "prefect" / "server.log").read_text(errors="replace")
        assert f"release {second_id} in child" in log, "the warm runner ran the second release"
        deployed = _sds(
            "deploy", "--home", str(home), "--input", str(tiny_csv), "--config", str(tiny_config)
        )
        assert deployed.returncode == 0, deployed.stderr
        port = json.loads((home / "prefect" / "server.json").read_text())["port"]
        yield ServedHome(home, port, outside)
    finally:
        _sds("server", "stop", "--home", str(home))
        shutil.rmtree(outside, ignore_errors=True)


def _every_path(home: Path) -> list[Path]:
    """The home and every path under it (symlinked folders not followed)."""
    found = [home]
    for folder, dirs, files in os.walk(home):
        found += [Path(folder, name) for name in (*dirs, *files)]
    return found


def test_every_path_under_a_served_home_is_private(served: ServedHome) -> None:
    """After releases with the home's server (in-process and warm) and `sds deploy`: the home,
    prefect/ and every folder under the home 0700, every file 0600 (the Prefect database and its
    WAL, the server's log and record, the runner's socket, published and private files)."""
    paths = _every_path(served.home)
    names = {p.relative_to(served.home).as_posix() for p in paths}
    assert {"prefect", "prefect/prefect.db", "prefect/server.log", "prefect/runner.sock"} <= names
    assert any(n.startswith("releases/tiny/") and n.endswith("/synthetic.csv") for n in names)
    loose = {
        p.relative_to(served.home).as_posix() or ".": oct(stat.S_IMODE(p.lstat().st_mode))
        for p in paths
        if stat.S_IMODE(p.lstat().st_mode) != (0o700 if p.is_dir() else 0o600)
    }
    assert loose == {}


def _readable_as(user: str, paths: list[Path]) -> list[str]:
    """The paths ``user`` can read (a file: its first byte; a socket: a connection) or list (a
    folder), probed in a forked child that becomes that user (no exec: root's interpreter may be
    unreadable to it). The kind of each path is taken here, as its owner."""
    kinds = []
    for path in paths:
        mode = path.lstat().st_mode
        kind = "dir" if stat.S_ISDIR(mode) else "socket" if stat.S_ISSOCK(mode) else "file"
        kinds.append((str(path), kind))
    account = pwd.getpwnam(user)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: probe, report, exit without returning into pytest
        code = 1
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(account.pw_gid)
            os.setuid(account.pw_uid)
            readable = []
            for path, kind in kinds:
                try:
                    if kind == "dir":
                        os.listdir(path)
                    elif kind == "socket":
                        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
                            s.connect(path)
                    else:
                        with open(path, "rb") as f:
                            f.read(1)
                except OSError:
                    continue
                readable.append(path)
            os.write(write, json.dumps(readable).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        answer = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the probe as another account failed"
    return list(json.loads(answer))


@pytest.mark.skipif(os.geteuid() != 0, reason="becoming another account (nobody) needs root")
def test_another_account_reads_nothing_under_the_home(served: ServedHome) -> None:
    """As another local account (nobody): 0 readable or listable paths under a home that ran
    releases with its server, of all of them (database, logs, releases, private files,
    sockets); the same probe does read the world-readable control file beside the home."""
    paths = _every_path(served.home)
    assert len(paths) > 50
    control = [served.outside, served.outside / "control.txt"]
    readable = _readable_as("nobody", [*control, *paths])
    assert readable[:2] == [str(p) for p in control], "the probe cannot read what it should"
    assert readable[2:] == []


def _same_machine(url: str, port: int) -> bool:
    """Whether a request of the page goes to the home's server (or stays in the page)."""
    if url.startswith("data:"):
        return True
    parts = urlsplit(url.removeprefix("blob:"))  # blob:http://127.0.0.1:PORT/<uuid>
    return (parts.hostname, parts.port) == ("127.0.0.1", port)


@pytest.mark.browser
def test_the_ui_makes_no_request_outside_the_machine(served: ServedHome, tmp_path: Path) -> None:
    """Chromium on the home's UI, logged in with the home's credential: the pages a custodian
    opens (runs, a flow run, deployments, a deployment's form, artifacts) in the default UI and
    in the older one render, and every request and WebSocket they open goes to the home's own
    address (before: the default UI fetched https://sr-client-cfg.amplitude.com/... from every
    page, with analytics off)."""
    chromium = system_chromium()
    from playwright import sync_api

    auth = (served.home / AUTH_FILE).read_text().strip()
    runs = _post(f"{served.base}/api/flow_runs/filter", {}, served.home)
    run = next(r for r in runs if r["name"].startswith("release-"))
    deployments = _post(f"{served.base}/api/deployments/filter", {}, served.home)
    deployment = next(d for d in deployments if d["name"] == "on-demand-tiny")
    pages = {  # the path of each page, and a text it must show once it has loaded
        "/runs": run["name"],
        f"/runs/flow-run/{run['id']}": run["name"],
        "/deployments": "on-demand-tiny",
        f"/deployments/deployment/{deployment['id']}": "on-demand-tiny",
        "/artifacts": "budget-tiny",
    }
    requests: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            context.on("request", lambda r: requests.append(r.url))
            page = context.new_page()
            page.on("websocket", lambda ws: requests.append(ws.url))
            page.goto(served.base, wait_until="networkidle")
            page.locator("input[type=password]").fill(auth)
            page.keyboard.press("Enter")
            page.wait_for_load_state("networkidle")
            for ui in ("/v2", ""):  # Prefect's default UI, then the one it can switch back to
                for path, shown in pages.items():
                    page.goto(served.base + ui + path, wait_until="networkidle")
                    page.get_by_text(shown).first.wait_for(timeout=60_000)
                    page.wait_for_timeout(1000)  # what the page asks for once it has rendered
            page.screenshot(path=str(tmp_path / "artifacts.png"))
        finally:
            browser.close()
    assert len(requests) > 100, "the pages made their requests"
    outside = sorted({url for url in requests if not _same_machine(url, served.port)})
    assert outside == []
