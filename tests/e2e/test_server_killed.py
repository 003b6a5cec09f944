"""The home's Prefect server killed (SIGKILL to its uvicorn process) while a release runs in the
warm runner, or just before ``sds resume``: the supervisor starts it again on the same port and
database, the release finishes with the bytes of an uninterrupted one, nothing is charged twice
and the audit passes (issue #25, point 3; docs/hardening.md, "Faults during a release")."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sds_release.flows.local.server import AUTH_FILE
from sds_release.store.run.faults import PAUSE_ENV, PAUSE_FILE
from tests.e2e.prefect_processes import free_port
from tests.helpers import EXAMPLE, PROJECT, charges

pytestmark = [pytest.mark.server, pytest.mark.slow]

EXAMPLE_CONFIG = PROJECT / "examples" / "release.toml"
SEED = "11"
PAUSED_AT = "aggregate-2"  # charged and computed, its checkpoint not yet written


def _env(**extra: str) -> dict[str, str]:
    drop = (
        "PREFECT_API_URL",
        "PREFECT_API_AUTH_STRING",
        "SDS_SERVER",
        "SDS_RUNNER",
        "SDS_WORKER",
        PAUSE_ENV,
    )
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "sds_release.flows.cli", *args]


def _sds(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _cmd(*args), cwd=PROJECT, env=_env(**env), capture_output=True, text=True, timeout=900
    )


def _release_args(home: Path, release_id: str) -> list[str]:
    return [
        *("release", str(EXAMPLE), "--config", str(EXAMPLE_CONFIG), "--home", str(home)),
        *("--quiet", "--release-id", release_id, "--seed", SEED),
    ]


def _wait(condition: Callable[[], object], what: str, timeout: float = 300) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"still waiting for: {what}")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _uvicorn(supervisor: int) -> int:
    """The pid of the supervisor's live uvicorn child (the Prefect server itself)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if int(fields[1]) == supervisor and fields[0] != "Z" and " uvicorn " in cmd:
                return int(entry.name)
    raise AssertionError(f"supervisor {supervisor} has no uvicorn child")


def _kill_server(home: Path) -> tuple[int, int]:
    """SIGKILL the home's uvicorn process; waits until it is gone. (supervisor pid, port)."""
    record = json.loads((home / "prefect" / "server.json").read_text())
    server = _uvicorn(record["pid"])
    os.kill(server, signal.SIGKILL)
    _wait(lambda: not _alive(server), f"the end of uvicorn {server}", timeout=60)
    return record["pid"], record["port"]


def _api(home: Path, path: str, body: dict[str, Any]) -> Any:
    """POST to the home's server API with the home's credential."""
    port = json.loads((home / "prefect" / "server.json").read_text())["port"]
    token = base64.b64encode((home / AUTH_FILE).read_text().strip().encode()).decode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Basic {token}"},
    )
    with urllib.request.urlopen(request, timeout=60) as r:
        return json.loads(r.read())


def _answers(home: Path) -> bool:
    try:
        _api(home, "flow_runs/count", {})
    except OSError:
        return False
    return True


def _published(out: str) -> Path:
    return Path(out.strip().splitlines()[-1])


def _hashes(release_dir: Path) -> dict[str, str]:
    """The manifest's artifact hashes except report.html's (it shows the time of the release)."""
    manifest = json.loads((release_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    return {k: v for k, v in manifest["artifacts"].items() if k != "report.html"}


def _charged(home: Path, release_id: str) -> list[str]:
    return [r.stage for r in charges(home) if r.release_id == release_id]


def _audit_verifies(home: Path) -> None:
    audit = _sds("audit", "--verify", "--home", str(home))
    assert audit.returncode == 0, audit.stdout + audit.stderr


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A home whose server (and warm release runner) `sds server start` started."""
    home = tmp_path_factory.mktemp("srv") / "home"
    started = _sds("server", "start", "--home", str(home), "--port", str(free_port()))
    assert started.returncode == 0, started.stderr
    assert "release runner: ready" in started.stdout, started.stdout
    try:
        yield home
    finally:
        _sds("server", "stop", "--home", str(home))


@pytest.fixture(scope="module")
def reference(
    served: Path, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], tuple[dict[str, str], str]]:
    """The artifact hashes and stderr of an uninterrupted release with a given id (and the same
    seed), run in-process in another home against the served home's server."""
    record = json.loads((served / "prefect" / "server.json").read_text())
    client = {
        "PREFECT_API_URL": f"http://127.0.0.1:{record['port']}/api",
        "PREFECT_API_AUTH_STRING": (served / AUTH_FILE).read_text().strip(),
    }

    def run(release_id: str) -> tuple[dict[str, str], str]:
        home = tmp_path_factory.mktemp("uninterrupted") / "home"
        done = _sds(*_release_args(home, release_id), **client)
        assert done.returncode == 0, done.stderr
        return _hashes(_published(done.stdout)), done.stderr

    return run


def test_release_outlives_a_killed_server(
    served: Path, reference: Callable[[str], tuple[dict[str, str], str]]
) -> None:
    """SIGKILL of the server while a release in the warm runner is paused in a stage: the
    supervisor restarts the server, the release completes (exit 0, nothing false on stderr)
    with the bytes of an uninterrupted release, each stage charged once, and the audit passes."""
    home, rid = served, "srv-killed-1"
    expected, said = reference(rid)
    marker = home / "private" / rid / PAUSE_FILE
    client = subprocess.Popen(
        _cmd(*_release_args(home, rid)),
        cwd=PROJECT,
        env=_env(**{PAUSE_ENV: PAUSED_AT}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait(lambda: marker.exists() or client.poll() is not None, f"the pause at {PAUSED_AT}")
        assert client.poll() is None, client.communicate()
        supervisor, port = _kill_server(home)
        marker.unlink()  # the release goes on while the server is down
        out, err = client.communicate(timeout=900)
    finally:
        client.kill()
    assert client.returncode == 0, err
    assert err == said  # the warnings of the uninterrupted release, nothing else
    assert _alive(supervisor)  # the same supervisor, the server started again on its port
    log = (home / "prefect" / "server.log").read_text(errors="replace")
    assert f"restarting it on port {port}" in log and "server answers again" in log
    assert _published(out).name == rid
    assert _hashes(_published(out)) == expected
    charged = _charged(home, rid)
    assert PAUSED_AT in charged and len(charged) == len(set(charged)), charged
    _audit_verifies(home)
    runs = _api(home, "flow_runs/filter", {})  # the run's end reached the restarted server
    states = [r["state_type"] for r in runs if r["name"] == f"release-{rid}"]
    assert states == ["COMPLETED", "COMPLETED"]  # the reference's run (same server) and this


def test_release_whose_server_stays_down(
    served: Path, reference: Callable[[str], tuple[dict[str, str], str]]
) -> None:
    """The server killed and kept down (supervisor stopped) to the end of a release whose client
    does not retry: the stages need no server, so the release completes and is published intact
    (nothing undone by the Prefect artifacts that fail after publishing), exit 0, with one
    warning that the server missed the run's end."""
    home, rid = served, "srv-killed-2"
    expected, said = reference(rid)
    marker = home / "private" / rid / PAUSE_FILE
    client = subprocess.Popen(  # in-process: the runner serves only its own Prefect settings
        _cmd(*_release_args(home, rid)),
        cwd=PROJECT,
        env=_env(**{PAUSE_ENV: PAUSED_AT, "PREFECT_CLIENT_MAX_RETRIES": "0"}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    record = json.loads((home / "prefect" / "server.json").read_text())
    try:
        _wait(lambda: marker.exists() or client.poll() is not None, f"the pause at {PAUSED_AT}")
        assert client.poll() is None, client.communicate()
        os.kill(record["pid"], signal.SIGSTOP)  # no restart until the release has ended
        _kill_server(home)
        marker.unlink()
        out, err = client.communicate(timeout=900)
    finally:
        os.kill(record["pid"], signal.SIGCONT)
        client.kill()
    assert client.returncode == 0, err
    warned = [line for line in err.splitlines(True) if line not in said.splitlines(True)]
    assert len(warned) == 1, err
    assert warned[0].startswith("sds: warning: the Prefect server at http://127.0.0.1:")
    assert "the release itself is complete and published" in warned[0]
    assert _hashes(_published(out)) == expected
    charged = _charged(home, rid)
    assert PAUSED_AT in charged and len(charged) == len(set(charged)), charged
    _wait(lambda: _answers(home), "the restarted server", timeout=300)
    _audit_verifies(home)


def test_resume_right_after_a_server_crash(
    served: Path, reference: Callable[[str], tuple[dict[str, str], str]]
) -> None:
    """With no release running, SIGKILL of the server then at once `sds resume` of a release
    killed earlier: the resume waits for the restarted server and completes the release, saying
    only what an uninterrupted release says."""
    home, rid = served, "srv-killed-3"
    expected, said = reference(rid)
    killed = subprocess.run(
        _cmd(*_release_args(home, rid)),
        cwd=PROJECT,
        env=_env(SDS_TEST_KILL_AT=PAUSED_AT, SDS_RUNNER="off"),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    _kill_server(home)
    resumed = _sds("resume", rid, "--home", str(home), "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stderr == said
    assert _hashes(_published(resumed.stdout)) == expected
    charged = _charged(home, rid)
    assert PAUSED_AT in charged and len(charged) == len(set(charged)), charged
    _audit_verifies(home)
