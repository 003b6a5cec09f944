"""The warm release runner (sds_release/flows/local/runner.py): releases handed to a forked child of
the home's runner give what an in-process release gives, a killed client takes its child with it,
and the runner ends with the server."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sds_release.flows.local.server import AUTH_FILE
from tests.helpers import PROJECT, unseeded

pytestmark = [pytest.mark.server, pytest.mark.slow]

EXAMPLE = PROJECT / "examples" / "pums_ca_10k.csv"
EXAMPLE_CONFIG = PROJECT / "examples" / "release.toml"


def _env(**extra: str) -> dict[str, str]:
    drop = ("PREFECT_API_URL", "SDS_SERVER", "SDS_RUNNER", "SDS_WORKER")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "sds_release.flows.cli", *args]


def _sds(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _cmd(*args), cwd=PROJECT, env=_env(**env), capture_output=True, text=True, timeout=600
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _runner_pid(home: Path) -> int:
    status = _sds("server", "status", "--home", str(home))
    assert status.returncode == 0, status.stderr
    line = next(x for x in status.stdout.splitlines() if x.startswith("release runner:"))
    assert "ready (pid " in line, status.stdout
    return int(line.split("(pid ")[1].split(")")[0])


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(entry.name))
    return out


def _wait(condition: object, what: str, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"still waiting for: {what}")


def _example_release(home: Path, release_id: str) -> list[str]:
    """The command of the 10k example's release (a few seconds of stages to interrupt)."""
    return _cmd(
        *("release", str(EXAMPLE), "--config", str(EXAMPLE_CONFIG), "--home", str(home)),
        *("--quiet", "--release-id", release_id),
    )


def _forked(home: Path, release_id: str) -> bool:
    """Whether the runner's log says it forked a child for the release."""
    log = (home / "prefect" / "server.log").read_text(errors="replace")
    return f"release {release_id} in child" in log


def _digests(release_dir: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(release_dir.iterdir())
        if p.name.startswith(("aggregates", "synthetic"))
    }


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    """A home with a running server and its release runner; yields (home, port)."""
    home, port = tmp_path_factory.mktemp("warm") / "home", _free_port()
    started = _sds("server", "start", "--home", str(home), "--port", str(port))
    assert started.returncode == 0, started.stderr
    assert "release runner: ready" in started.stdout, started.stdout
    try:
        yield home, port
    finally:
        _sds("server", "stop", "--home", str(home))


def test_runner_socket_is_private(warm: tuple[Path, int]) -> None:
    """The runner listens on a Unix socket only its user can open (mode 0600)."""
    home, _ = warm
    mode = (home / "prefect" / "runner.sock").stat().st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600


def test_release_through_runner_matches_in_process(
    warm: tuple[Path, int], tmp_path: Path, tiny_csv: Path, tiny_config: Path
) -> None:
    """A release the runner's child runs publishes the same aggregates and synthetic files
    (sha256) as the same release (id and key) run in-process, and prints the same last line."""
    home, port = warm
    args = ("release", str(tiny_csv), "--config", str(tiny_config), "--quiet", "--seed", "7")
    warm_run = _sds(*args, "--home", str(home), "--release-id", "same-1")
    assert warm_run.returncode == 0, warm_run.stderr
    assert _forked(home, "same-1")
    cold_home = tmp_path / "cold"
    cold_run = _sds(  # an explicit API URL: no local server, no runner, in-process
        *args, "--home", str(cold_home), "--release-id", "same-1",
        PREFECT_API_URL=f"http://127.0.0.1:{port}/api",
        PREFECT_API_AUTH_STRING=(home / AUTH_FILE).read_text().strip(),  # the warm home's server
    )  # fmt: skip
    assert cold_run.returncode == 0, cold_run.stderr
    warm_dir = Path(warm_run.stdout.strip().splitlines()[-1])
    cold_dir = Path(cold_run.stdout.strip().splitlines()[-1])
    assert warm_dir.name == cold_dir.name == "same-1"
    assert unseeded(warm_run.stderr) == unseeded(cold_run.stderr) == ""
    digests = _digests(warm_dir)
    assert {"aggregates.parquet", "synthetic.csv"} <= digests.keys()
    assert digests == _digests(cold_dir)


def test_refusal_in_the_flow_reads_the_same(
    warm: tuple[Path, int], tiny_csv: Path, tiny_config: Path
) -> None:
    """A release the flow refuses (the model would exceed max_model_bytes) ends with the same
    exit status and stderr through the runner as in-process."""
    home, _ = warm
    args = ("release", str(tiny_csv), "--config", str(tiny_config), "--home", str(home))
    args += ("--quiet", "--synthesis", "model", "--max-model-bytes", "1")
    through = _sds(*args, "--release-id", "refused-a")
    here = _sds(*args, "--release-id", "refused-b", SDS_RUNNER="off")
    assert _forked(home, "refused-a") and not _forked(home, "refused-b")
    assert through.returncode == here.returncode == 1
    assert "max_model_bytes" in through.stderr
    assert through.stderr.replace("refused-a", "ID") == here.stderr.replace("refused-b", "ID")
    assert through.stdout == here.stdout == ""


def test_preflight_refusal_in_the_child_reads_the_same(
    warm: tuple[Path, int], tiny_csv: Path, tiny_config: Path
) -> None:
    """A release the pre-flight refuses (a column use_columns names is not in the input) is
    refused by the runner's child with the client's exit status and stderr, before any flow
    run; and a warning the pre-flight prints (a fixed seed) is printed once either way."""
    home, _ = warm
    args = ("release", str(tiny_csv), "--config", str(tiny_config), "--home", str(home))
    bad = (*args, "--quiet", "--use-columns", "no_such_column")
    through = _sds(*bad, "--release-id", "pre-a")
    here = _sds(*bad, "--release-id", "pre-b", SDS_RUNNER="off")
    assert _forked(home, "pre-a") and not _forked(home, "pre-b")
    assert through.returncode == here.returncode == 1
    assert "'no_such_column'" in through.stderr
    assert through.stderr.replace("pre-a", "ID") == here.stderr.replace("pre-b", "ID")
    assert through.stdout == here.stdout == ""
    seeded = _sds(*args, "--quiet", "--seed", "7", "--release-id", "pre-c")
    assert seeded.returncode == 0 and _forked(home, "pre-c"), seeded.stderr
    assert seeded.stderr.count("NOT PRIVATE") == 1


def test_killed_client_kills_its_child(warm: tuple[Path, int]) -> None:
    """SIGKILL of the `sds release` client (once its release has started) ends the runner's
    child running it; the release is then resumable as after a killed in-process release."""
    home, _ = warm
    runner = _runner_pid(home)
    before = set(_children(runner))
    client = subprocess.Popen(
        _example_release(home, "killed-1"),
        cwd=PROJECT,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait(lambda: set(_children(runner)) - before, "the runner's child for the release")
        (child,) = set(_children(runner)) - before
        started = home / "private" / "killed-1" / "params.json"
        _wait(lambda: started.is_file() or client.poll() is not None, "the release's start")
        client.kill()
    finally:
        client.kill()
        client.wait()
    _wait(lambda: not _alive(child), f"the end of child {child}")
    resumed = _sds("resume", "killed-1", "--home", str(home), "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert Path(resumed.stdout.strip().splitlines()[-1]).name == "killed-1"


def test_status_reports_the_runner_and_stop_ends_it(tmp_path: Path) -> None:
    """`sds server status` names the runner; after `sds server stop` it is gone with its
    socket; with SDS_RUNNER=off the server runs without one."""
    home = tmp_path / "home"
    started = _sds("server", "start", "--home", str(home), "--port", str(_free_port()))
    assert started.returncode == 0, started.stderr
    runner = _runner_pid(home)
    assert _alive(runner)
    stopped = _sds("server", "stop", "--home", str(home))
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    _wait(lambda: not _alive(runner), f"the end of runner {runner}")
    assert not (home / "prefect" / "runner.sock").exists()
    off = _sds(
        "server", "start", "--home", str(home), "--port", str(_free_port()), SDS_RUNNER="off"
    )
    try:
        assert off.returncode == 0, off.stderr
        assert "release runner: off" in off.stdout
    finally:
        _sds("server", "stop", "--home", str(home))
    assert not (home / "prefect" / "server.json").exists()


def test_sigint_reaches_the_child(warm: tuple[Path, int]) -> None:
    """Ctrl-C (SIGINT) of the client is forwarded: the child stops and the client exits as an
    interrupted in-process release does (status 130, nothing on stderr)."""
    home, _ = warm
    runner = _runner_pid(home)
    before = set(_children(runner))
    client = subprocess.Popen(
        # 300k synthetic records: seconds of synthesis, so the signal finds the release running
        # (the example alone can finish between finding the child and sending the signal)
        [*_example_release(home, "interrupted-1"), "--synthetic-records", "300000"],
        cwd=PROJECT,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # a runner started in the background (`cmd &`, nohup) ignores SIGINT and its children
        # inherit that: the client would rightly ignore Ctrl-C too; a terminal's client doesn't
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        _wait(lambda: set(_children(runner)) - before, "the runner's child for the release")
        (child,) = set(_children(runner)) - before
        client.send_signal(signal.SIGINT)
        _, err = client.communicate(timeout=300)
    finally:
        client.kill()
    assert (client.returncode, err) == (130, "")
    _wait(lambda: not _alive(child), f"the end of child {child}")
