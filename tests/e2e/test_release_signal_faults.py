"""Faults during a release with real processes (issue #25.3): SIGTERM to an in-process release,
SIGTERM and SIGKILL to the warm runner holding one, PostgreSQL stopped and started under one.

Each release pauses at a named point (``SDS_TEST_PAUSE_AT``), the fault happens, and then: the
release completes, or fails with a message naming ``sds resume ID``; resumed, it publishes the
artifacts (sha256 in its manifest, report.html aside) of an uninterrupted release with the same
id and seed; nothing incomplete looks published; each stage is charged once; the audit passes.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sds_release.store.ledger.book import Ledger
from sds_release.store.run.faults import PAUSE_ENV, PAUSE_FILE
from tests.helpers import PROJECT, complete_releases, run_cli
from tests.pgserver import PgServer, ensure_installed

pytestmark = [pytest.mark.slow]

RID = "fault-1"
SEED = "5"
CHARGED = ["count", "aggregate-1", "aggregate-2"]  # the tiny config's charged stages
TIMEOUT_S = 600


def _release_args(tiny_csv: Path, tiny_config: Path, home: Path) -> list[str]:
    return [
        *("release", str(tiny_csv), "--config", str(tiny_config), "--home", str(home)),
        *("--release-id", RID, "--seed", SEED, "--quiet"),
    ]


def _hashes(home: Path) -> dict[str, str]:
    """The artifact hashes the release's manifest records, report.html aside (it dates itself)."""
    manifest = json.loads(next(home.glob(f"releases/*/{RID}/manifest.json")).read_text())
    assert manifest["status"] == "complete"
    return {k: v for k, v in manifest["artifacts"].items() if k != "report.html"}


@pytest.fixture(scope="module")
def reference(
    tmp_path_factory: pytest.TempPathFactory, tiny_csv: Path, tiny_config: Path, prefect_server: str
) -> dict[str, str]:
    """The artifact hashes of the uninterrupted release (same id and seed)."""
    home = tmp_path_factory.mktemp("uninterrupted")
    code, _, err = run_cli(*_release_args(tiny_csv, tiny_config, home))
    assert code == 0, err
    return _hashes(home)


def _env(**extra: str) -> dict[str, str]:
    drop = ("PREFECT_API_URL", "SDS_SERVER", "SDS_RUNNER", "SDS_WORKER", "SDS_LEDGER_URL")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def _start(args: list[str], point: str, **env: str) -> subprocess.Popen[str]:
    """``sds ARGS`` in a child process that pauses at ``point``."""
    return subprocess.Popen(
        [sys.executable, "-m", "sds_release.flows.cli", *args],
        cwd=PROJECT,
        env=_env(**{PAUSE_ENV: point}, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait(condition: Callable[[], object], what: str, timeout: float = TIMEOUT_S) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"still waiting for: {what}")


def _paused(proc: subprocess.Popen[str], home: Path) -> Path:
    """Wait until the release is paused; its marker (remove it to let the release go on)."""
    marker = home / "private" / RID / PAUSE_FILE
    _wait(lambda: marker.is_file() or proc.poll() is not None, "the paused release")
    if proc.poll() is not None:
        raise AssertionError(f"the release ended before its pause: {proc.communicate()}")
    return marker


def _stopped_resumably(proc: subprocess.Popen[str], home: Path, status: int) -> None:
    """The release ended with ``status`` and a message naming `sds resume`, with nothing
    published but its manifest, which does not say complete."""
    _, err = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == status, err
    assert f"`sds resume {RID}`" in err and "Traceback" not in err, err
    assert complete_releases(home) == []
    (release_dir,) = home.glob(f"releases/*/{RID}")
    assert [p.name for p in release_dir.iterdir()] == ["manifest.json"]
    (home / "private" / RID / PAUSE_FILE).unlink(missing_ok=True)


def _check_outcome(home: Path, reference: dict[str, str], *ledger: str) -> None:
    """Same artifacts as uninterrupted, every stage charged once, the audit passes."""
    assert _hashes(home) == reference
    url = ledger[1] if ledger else f"sqlite:///{home / 'ledger.sqlite'}"
    assert [c.stage for c in Ledger.from_url(url).charges(release_id=RID)] == CHARGED
    code, out, err = run_cli("audit", "--verify", "--json", "--home", str(home), *ledger)
    assert code == 0 and json.loads(out)["ok"], out + err


def test_sigterm_to_in_process_release(
    reference: dict[str, str], tiny_csv: Path, tiny_config: Path, tmp_path: Path,
    prefect_server: str,
) -> None:  # fmt: skip
    """SIGTERM to `sds release` (no warm runner) paused after aggregate-2 drew its noise: exit
    143 with a message to `sds resume`; the resume gives the uninterrupted release's bytes."""
    home = tmp_path / "home"
    proc = _start(
        _release_args(tiny_csv, tiny_config, home), "aggregate-2", PREFECT_API_URL=prefect_server
    )
    _paused(proc, home)
    proc.send_signal(signal.SIGTERM)
    _stopped_resumably(proc, home, 128 + signal.SIGTERM)
    code, _, err = run_cli("resume", RID, "--home", str(home), "--quiet")
    assert code == 0, err
    _check_outcome(home, reference)


# -- the warm runner ----------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _sds(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sds_release.flows.cli", *args],
        cwd=PROJECT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


@pytest.fixture
def warm_home(tmp_path: Path) -> Iterator[Path]:
    """A home whose server runs with its warm release runner."""
    home = tmp_path / "home"
    started = _sds("server", "start", "--home", str(home), "--port", str(_free_port()))
    assert started.returncode == 0 and "release runner: ready" in started.stdout, started
    try:
        yield home
    finally:
        _sds("server", "stop", "--home", str(home))


def _runner_pid(home: Path) -> int:
    status = _sds("server", "status", "--home", str(home))
    line = next(x for x in status.stdout.splitlines() if x.startswith("release runner:"))
    assert "ready (pid " in line, status.stdout
    return int(line.split("(pid ")[1].split(")")[0])


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.server
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_runner_killed_while_it_holds_a_release(
    sig: signal.Signals, reference: dict[str, str], tiny_csv: Path, tiny_config: Path,
    warm_home: Path,
) -> None:  # fmt: skip
    """The warm runner gets ``sig`` while its child runs a release (paused after aggregate-2):
    the child is stopped (no release runs on), the waiting client exits 143 with a message to
    `sds resume`; the supervisor does not restart the runner, so the resume runs in-process and
    gives the uninterrupted release's bytes."""
    home = warm_home
    runner = _runner_pid(home)
    proc = _start(_release_args(tiny_csv, tiny_config, home), "aggregate-2")
    _paused(proc, home)
    log = home / "prefect" / "server.log"
    child = int(log.read_text().split(f"release {RID} in child ")[1].split()[0])
    os.kill(runner, sig)
    _stopped_resumably(proc, home, 128 + signal.SIGTERM)
    assert not _alive(child)
    _wait(lambda: "release runner exited" in log.read_text(), "the supervisor's note")
    assert "releases run in-process" in log.read_text()
    resumed = _sds("resume", RID, "--home", str(home), "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert log.read_text().count(f"release {RID} in child") == 1  # the resume ran in-process
    _check_outcome(home, reference)


# -- PostgreSQL ---------------------------------------------------------------------------------
@pytest.fixture
def own_pg() -> Iterator[PgServer]:
    """A PostgreSQL server of this test alone (it is stopped and started under a release)."""
    server = PgServer(ensure_installed())
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("down_s", [0.0, 5.0], ids=["restart", "down-5s"])
def test_postgres_restarted_during_release(
    down_s: float, reference: dict[str, str], tiny_csv: Path, tiny_config: Path,
    tmp_path: Path, own_pg: PgServer, prefect_server: str,
) -> None:  # fmt: skip
    """PostgreSQL, which holds the ledger, is stopped right before aggregate-1 is charged and
    started again at once (a restart) or after the release has gone on for ``down_s`` s: the
    release retries the ledger and completes with the uninterrupted release's bytes, each stage
    charged once."""
    home, url = tmp_path / "home", own_pg.create_schema()
    proc = _start(
        _release_args(tiny_csv, tiny_config, home),
        "charge:aggregate-1",
        PREFECT_API_URL=prefect_server,
        SDS_LEDGER_URL=url,
    )
    marker = _paused(proc, home)
    own_pg.halt()
    if down_s:
        marker.unlink()
        time.sleep(down_s)
        assert proc.poll() is None, proc.communicate()  # still waiting for the ledger
        own_pg.start()
    else:
        own_pg.start()
        marker.unlink()
    out, err = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 0, err
    assert Path(out.strip().splitlines()[-1]).name == RID
    _check_outcome(home, reference, "--ledger", url)
