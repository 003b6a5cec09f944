"""Real Prefect processes for the deployment tests: a server, process workers, and waiting for
a flow run through the API (state and the run's log lines)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def client_env(url: str, prefect_home: Path) -> dict[str, str]:
    """The environment of a Prefect client, worker or server process of these tests: the
    server's URL, flow-run logs sent to it at INFO, workers polling every 2 s."""
    return {
        **os.environ,
        "PREFECT_HOME": str(prefect_home),
        "PREFECT_API_URL": url,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "false",
        "PREFECT_API_BLOCKS_REGISTER_ON_START": "false",
        "PREFECT_LOGGING_TO_API_ENABLED": "true",
        "PREFECT_LOGGING_LEVEL": "INFO",
        "PREFECT_WORKER_QUERY_SECONDS": "2",
        "PREFECT_WORKER_PREFETCH_SECONDS": "2",
    }


@contextmanager
def prefect_server(python: str, prefect_home: Path) -> Iterator[dict[str, str]]:
    """``prefect server start`` on a free port; yields the client environment. Its database
    (Prefect's default, ``prefect_home/prefect.db``) starts as a copy of the run's template,
    as a home's does (tests/conftest.py builds it before the first e2e test)."""
    from sds_release.flows.local.server import server_dir
    from sds_release.flows.local.template import seed_database

    assert server_dir(prefect_home.parent) == prefect_home, "name it prefect/, as a home's"
    seed_database(prefect_home.parent)
    port = free_port()
    env = client_env(f"http://127.0.0.1:{port}/api", prefect_home)
    log = open(prefect_home / "server.log", "wb")
    proc = subprocess.Popen(
        [python, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        end = time.monotonic() + 240
        while True:
            if proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError((prefect_home / "server.log").read_text()[-3000:])
            try:
                with urllib.request.urlopen(f"{env['PREFECT_API_URL']}/health", timeout=5):
                    break
            except OSError:
                time.sleep(1)
        yield env
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()


@contextmanager
def worker(
    command: Sequence[str], pool: str, env: dict[str, str], cwd: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """``prefect worker start --pool POOL`` (``command`` is how prefect is run) in ``cwd``,
    its output in ``cwd/worker-POOL.log``; stopped at the end."""
    log = open(cwd / f"worker-{pool}.log", "wb")
    proc = subprocess.Popen(
        [*command, "worker", "start", "--pool", pool],
        env=env,
        cwd=cwd,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield proc
    finally:
        # SIGTERM: Prefect's worker (3.9) sends itself SIGINT and should stop once its runs'
        # processes end; it often never does (2026-11-28: every worker of test_deploy_worker.py
        # and test_ui_custom_run.py, each killed after the 60 s this waited). No test looks at
        # how a worker stops and every run it started is final by now: 5 s, then SIGKILL.
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def wait_final(client: Any, flow_run_id: Any, timeout: float = 600) -> Any:
    """The flow run once it is in a final state (Completed, Failed, Crashed, Cancelled)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        run = client.read_flow_run(flow_run_id)
        if run.state is not None and run.state.is_final():
            return run
        time.sleep(0.5)
    raise TimeoutError(f"flow run {flow_run_id} not final within {timeout} s: {run.state}")


def run_logs(client: Any, flow_run_id: Any, wait_for: str | None = None) -> str:
    """Every log line of a flow run on the server, joined. The run's last lines are sent in the
    background after its end: with ``wait_for``, read again until a line holds it (at most
    30 s), else 3 s after the first read."""
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    def read() -> str:
        logs = client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
        return "\n".join(line.message for line in logs)

    if wait_for is None:
        time.sleep(3)
        return read()
    end = time.monotonic() + 30
    while wait_for not in (text := read()) and time.monotonic() < end:
        time.sleep(0.25)
    return text
