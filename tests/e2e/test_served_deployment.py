"""A real local Prefect server: deploy prefect.yaml, serve the flow, trigger runs via the API."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import PROJECT, charges

pytestmark = [pytest.mark.server, pytest.mark.slow]

SERVE = """
import sys
from prefect import serve
from sds_release.flows.release import release
on_demand = release.to_deployment(name="test-on-demand", enforce_parameter_schema=True)
nightly = release.to_deployment(
    name="test-nightly", cron="0 2 * * *", enforce_parameter_schema=True,
    parameters={"params": {"input": sys.argv[1], "config": sys.argv[2], "home": sys.argv[3],
                           "epsilon": 2.0}})
serve(on_demand, nightly)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 180) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"prefect server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(1)
    raise RuntimeError("prefect server did not answer /api/health within 180 s")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """`prefect server start` on 127.0.0.1 with its own PREFECT_HOME; yields (url, env)."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path_factory.mktemp("prefect-server")),
        "PREFECT_API_URL": url,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "false",
        "PREFECT_API_BLOCKS_REGISTER_ON_START": "false",
        "PREFECT_RUNNER_POLL_FREQUENCY": "2",
        "PREFECT_LOGGING_TO_API_ENABLED": "true",
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "prefect",
            "server",
            "start",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_healthy(url, proc)
        yield url, env
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def _wait_served(proc: subprocess.Popen, names: list[str], timeout: float = 180) -> None:
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    end = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while time.monotonic() < end:
            if proc.poll() is not None:
                raise RuntimeError(proc.stderr.read().decode()[-3000:] if proc.stderr else "")
            try:
                for name in names:
                    client.read_deployment_by_name(name)
                return
            except ObjectNotFound:
                time.sleep(1)
    raise RuntimeError("served deployments did not appear within 180 s")


def test_prefect_yaml_deploys(
    server: tuple[str, dict[str, str]], tiny_csv: Path, tiny_config: Path, tmp_path: Path
) -> None:
    """`prefect deploy` registers the deployments of the pinned flow with a schema-enforced
    form of the run options only and a cron, on the locked pool `sds deploy --no-register`
    makes (runs of it: tests/e2e/test_deploy_worker.py)."""
    from sds_release.store.ledger.book import Ledger

    url, env = server
    home = tmp_path / "home"
    home.mkdir()
    Ledger.open(home).set_budget("tiny", epsilon=10.0, delta=1e-3)
    env = {**env, "SDS_PROJECT_DIR": str(PROJECT)}
    pins = subprocess.run(
        [sys.executable, "-m", "sds_release.flows.cli", "deploy", "--no-register",
         "--home", str(home), "--input", str(tiny_csv), "--config", str(tiny_config)],
        env=env, cwd=tmp_path, capture_output=True, timeout=300,
    )  # fmt: skip
    assert pins.returncode == 0, pins.stderr.decode()[-3000:]
    prefect = [sys.executable, "-m", "prefect", "--no-prompt"]
    done = subprocess.run(
        [*prefect, "deploy", "--all", "--prefect-file", "deployments/prefect.yaml"],
        env=env,
        cwd=PROJECT,
        capture_output=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout.decode()[-3000:] + done.stderr.decode()[-3000:]
    with urllib.request.urlopen(
        urllib.request.Request(
            f"{url}/deployments/filter",
            data=b"{}",
            method="POST",
            headers={"Content-Type": "application/json"},
        ),
        timeout=30,
    ) as r:
        deployments = {d["name"]: d for d in json.load(r)}
    assert set(deployments) == {
        "scheduled-release",
        "monthly-release",
        "on-demand-release",
        "dask-release",
    }
    nightly = deployments["scheduled-release"]
    assert nightly["enforce_parameter_schema"] is True
    assert nightly["schedules"][0]["schedule"]["cron"] == "0 2 * * *"
    for d in deployments.values():
        assert d["entrypoint"] == "sds_release/flows/deployed.py:deployed_release"
        assert d["parameters"] == {} and d["work_pool_name"] == "sds-local"
        options = d["parameter_openapi_schema"]["definitions"]["RunOptions"]
        assert "epsilon" in options["properties"] and "input" not in options["properties"]
        assert options["additionalProperties"] is False
    monthly = deployments["monthly-release"]
    assert monthly["schedules"][0]["schedule"]["cron"] == "0 3 1 * *"


def test_served_deployment_runs_and_exhausted_budget_fails(
    server: tuple[str, dict[str, str]], tiny_csv: Path, tiny_config: Path, tmp_path: Path
) -> None:
    """A run triggered through the API completes with artifacts; a scheduled-style run on an
    exhausted budget fails with that reason and publishes nothing."""
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    url, env = server
    home, poor = tmp_path / "home", tmp_path / "poor"
    from sds_release.store.ledger.book import Ledger
    from sds_release.store.workspace.home import resolve_home

    Ledger.open(resolve_home(poor)).set_budget("tiny", epsilon=0.5, delta=1e-3)
    serve = subprocess.Popen(
        [sys.executable, "-c", SERVE, str(tiny_csv), str(tiny_config), str(poor)],
        env=env,
        cwd=PROJECT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        with temporary_settings({PREFECT_API_URL: url}):
            _wait_served(serve, ["sds-release/test-on-demand", "sds-release/test-nightly"])
            run = run_deployment(
                "sds-release/test-on-demand",
                timeout=600,
                parameters={
                    "params": {
                        "input": str(tiny_csv),
                        "config": str(tiny_config),
                        "home": str(home),
                        "seed": 2,
                    }
                },
            )
            assert run.state is not None and run.state.is_completed(), run.state
            with get_client(sync_client=True) as client:
                keys = {a.key for a in client.read_artifacts()}
            assert {"release-tiny", "privacy-spend-tiny"} <= keys
            assert len(list(home.glob("releases/tiny/*/manifest.json"))) == 1

            failed = run_deployment("sds-release/test-nightly", timeout=600)
            assert failed.state is not None and failed.state.is_failed()
            assert "only (epsilon=0.5" in (failed.state.message or "")
            assert not (poor / "releases").exists()
            assert charges(poor) == []
    finally:
        serve.terminate()
        serve.wait(timeout=60)
