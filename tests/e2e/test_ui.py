"""The Prefect UI as the custodian's window, on a real local server with its UI (issue #16).

One ``prefect server start`` (UI on, ``PREFECT_UI_API_URL`` pointing at it) and the automations
of deployments/automations.yaml sending to a webhook receiver on 127.0.0.1. A CLI release of a
table with a planted raw value checks the logs, the graph, the budget artifact and the low-budget
notification; a served deployment that fails the schema gate on that value checks the failure
notification; headless Chromium (Debian's, driven by Playwright) checks the run page.
"""

from __future__ import annotations

import csv
import http.server
import itertools
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import COLUMNS, EXAMPLE, PROJECT, TINY_CONFIG, system_chromium

pytestmark = [pytest.mark.server, pytest.mark.slow]

PLANTED = "PLANTED-7731-SECRET"
N_ROWS = 437  # the true record count: must appear in no log line
DATASET = "ui"
CONFIG = f"""
dataset = "{DATASET}"
epsilon = 2.0
delta = 1e-6
reporting_length = 2
sensitive_zeros = ["sex", "married"]

[budget]
epsilon = 2.2
delta = 0.001
"""
SERVE = """
import sys
from prefect import serve
from sds_release.flows.release import release
serve(release.to_deployment(name="ui-failing", enforce_parameter_schema=True))
"""
PREFECT = [sys.executable, "-m", "prefect"]
SDS = [
    sys.executable,
    "-c",
    "from sds_release.flows.cli import main; main()",
]  # as `sds` runs (quick exit)
SHARE = ["--budget-share", "0.2"]
QUIET = ["--seed", "7", "--quiet"]
RELEASE_ID = "ui-cli"
_UNSET = (  # tests/conftest.py's hermetic settings, which would hide what the user gets
    "PREFECT_LOGGING_LEVEL",
    "PREFECT_LOGGING_TO_API_ENABLED",
    "PREFECT_UI_ENABLED",
    "PREFECT_HOME",
    "PREFECT_API_URL",
)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _api(url: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        url + path,
        data=data,
        method="GET" if body is None else "POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


class Receiver:
    """A webhook receiver on 127.0.0.1 that keeps every JSON body POSTed to it."""

    def __init__(self) -> None:
        received: list[dict[str, Any]] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append(json.loads(body or b"{}"))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.received = received
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, needle: str, timeout: float = 180) -> dict[str, Any]:
        """The first notification whose subject contains ``needle``."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for note in list(self.received):
                if needle in note.get("subject", ""):
                    return note
            time.sleep(1)
        raise AssertionError(f"no notification with {needle!r} in {timeout} s: {self.received}")


@pytest.fixture(scope="module")
def ui_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """`prefect server start` with its UI on 127.0.0.1; yields (base URL, client env)."""
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if k not in _UNSET}
    env.update(
        {
            "PREFECT_API_URL": f"{base}/api",
            "PREFECT_UI_API_URL": f"{base}/api",
            "PREFECT_UI_URL": base,
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_RUNNER_POLL_FREQUENCY": "2",
            "DO_NOT_TRACK": "1",
        }
    )
    server_env = {**env, "PREFECT_HOME": str(tmp_path_factory.mktemp("prefect-ui"))}
    proc = subprocess.Popen(
        [*PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=server_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        end = time.monotonic() + 300
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"prefect server exited with {proc.returncode}")
            try:
                if _api(base, "/api/health") is True:
                    break
            except OSError:
                pass
            if time.monotonic() > end:
                raise RuntimeError("prefect server did not answer /api/health within 300 s")
            time.sleep(1)
        env["PREFECT_HOME"] = str(tmp_path_factory.mktemp("prefect-client"))
        yield base, env
    finally:
        proc.terminate()
        proc.wait(timeout=60)


@pytest.fixture(scope="module")
def receiver(ui_server: tuple[str, dict[str, str]]) -> Receiver:
    """The webhook receiver, with deployments/automations.py installed to send to it."""
    _, env = ui_server
    hook = Receiver()
    done = subprocess.run(
        [sys.executable, "deployments/automations.py", "--webhook-url", hook.url, *SHARE],
        env=env,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "sds-release-failed" in done.stdout and "sds-budget-low" in done.stdout
    return hook


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """N_ROWS rows of the example plus a ``code`` column holding one planted raw value."""
    path = tmp_path_factory.mktemp("planted") / "planted.csv"
    with open(EXAMPLE, newline="") as f, open(path, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow([*COLUMNS, "code"])
        for i, row in enumerate(csv.DictReader(f)):
            if i == N_ROWS:
                break
            code = PLANTED if i == 17 else "ab"[i % 2]
            writer.writerow([*(row[c] for c in COLUMNS), code])
    return path


@pytest.fixture(scope="module")
def cli_release(
    ui_server: tuple[str, dict[str, str]],
    receiver: Receiver,
    planted: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    """One `sds release` through the CLI against the server (seed and release id pinned: the
    same noise every run); its flow run (API record)."""
    base, env = ui_server
    config = tmp_path_factory.mktemp("cfg") / "ui.toml"
    config.write_text(CONFIG)
    home = tmp_path_factory.mktemp("home-ui")
    done = subprocess.run(
        [
            *SDS,
            "release",
            str(planted),
            "--config",
            str(config),
            "--home",
            str(home),
            "--release-id",
            RELEASE_ID,
            *QUIET,
        ],
        env={**env, "PYTHONPATH": str(PROJECT)},
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    quiet = "--quiet: the console stays quiet, the logs go to the server"
    shown = [line for line in done.stderr.splitlines() if not line.startswith("sds: warning:")]
    assert shown == [], quiet  # warnings (seeded release, the records' agreement) are not logs
    release_dir = Path(done.stdout.strip().splitlines()[-1])
    manifest = json.loads((release_dir / "manifest.json").read_text())
    # the noise is keyed by the seed and the release id, both pinned: the DP count is the same
    # every run, and it is not the true count (else the no-true-count-in-a-log check is moot)
    assert manifest["release_id"] == RELEASE_ID
    assert manifest["input"]["rows"] != N_ROWS
    name = f"release-{manifest['release_id']}"
    runs = _api(base, "/api/flow_runs/filter", {"flow_runs": {"name": {"any_": [name]}}})
    assert len(runs) == 1
    return {"run": runs[0], "manifest": manifest, "home": home}


def _logs(base: str, flow_run_id: str) -> list[str]:
    logs = _api(
        base,
        "/api/logs/filter",
        {"logs": {"flow_run_id": {"any_": [flow_run_id]}}, "sort": "TIMESTAMP_ASC"},
    )
    return [entry["message"] for entry in logs]


def test_cli_release_logs_every_stage_to_the_server_without_raw_values(
    ui_server: tuple[str, dict[str, str]], cli_release: dict[str, Any]
) -> None:
    """Every stage logs its INFO line to the server; no planted value, no true record count,
    no time of a stage whose time is not public."""
    from sds_release.store.run.stages import release_stages, spec

    base, _ = ui_server
    messages = _logs(base, cli_release["run"]["id"])
    for stage in release_stages(2):
        assert any(m.startswith(f"{stage}: ") for m in messages), (stage, messages)
        end = f"{stage} finished in " if spec(stage).public_timing else f"{stage} finished"
        assert any(m.startswith(end) for m in messages), stage
        if not spec(stage).public_timing:
            assert not any(m.startswith(f"{stage} finished in ") for m in messages), stage
    text = "\n".join(messages)
    assert f"DP record count m={cli_release['manifest']['input']['rows']}" in text
    assert "charged ε=" in text and "DP combinations of length 2 survive" in text
    assert PLANTED not in text
    assert not re.search(rf"(?<![\w.]){N_ROWS}(?![\w.])", text), "true record count in a log"
    arts = _api(base, "/api/artifacts/filter", {})
    assert PLANTED not in json.dumps(arts)


def test_run_graph_is_the_stage_chain(
    ui_server: tuple[str, dict[str, str]], cli_release: dict[str, Any]
) -> None:
    """The task graph links count -> aggregate-k -> ... -> publish; budget is not a hub."""
    base, _ = ui_server
    runs = _api(
        base, "/api/task_runs/filter", {"flow_runs": {"id": {"any_": [cli_release["run"]["id"]]}}}
    )
    stage = {  # task run names: "count-9aa", "validate-output-600", "aggregate-2"
        r["id"]: r["name"] if r["name"].startswith("aggregate-") else r["name"].rsplit("-", 1)[0]
        for r in runs
    }
    edges = {
        (stage[up["id"]], stage[r["id"]])
        for r in runs
        for inputs in r["task_inputs"].values()
        for up in inputs
        if up.get("input_type") == "task_run"
    }
    chain = ["count", "aggregate-1", "aggregate-2", "normalize", "synthesize", "validate-output"]
    chain += ["evaluate", "publish"]
    for up, down in itertools.pairwise(chain):
        assert (up, down) in edges, (up, down, sorted(edges))
    assert {("budget", "ingest"), ("ingest", "validate"), ("validate", "prepare")} <= edges
    assert [d for u, d in edges if u == "budget"] == ["ingest"], "budget must not be a hub"


def test_budget_table_artifact_and_low_budget_notification(
    ui_server: tuple[str, dict[str, str]], cli_release: dict[str, Any], receiver: Receiver
) -> None:
    """budget-ui shows lifetime/spent/reserved/remaining; < 20 % left notifies the webhook."""
    base, _ = ui_server
    arts = _api(
        base, "/api/artifacts/latest/filter", {"artifacts": {"key": {"any_": ["budget-ui"]}}}
    )
    assert len(arts) == 1 and arts[0]["type"] == "table"
    rows = {row["entry"]: row for row in json.loads(arts[0]["data"])}
    assert rows["lifetime"]["ε"] == "2.2" and rows["remaining"]["ε"] == "0.2"
    assert rows["spent"]["ε"] == "2" and rows["reserved"]["ε"] == "0"
    release = f"release {cli_release['manifest']['release_id']}"
    assert rows[release]["status"].startswith("completed")
    summary = _api(
        base, "/api/artifacts/latest/filter", {"artifacts": {"key": {"any_": ["release-ui"]}}}
    )
    assert "report.html](file://" in summary[0]["data"]
    assert "(/artifacts/key/budget-ui)" in summary[0]["data"]
    note = receiver.wait_for(f"dataset {DATASET} is running out of privacy budget")
    assert "9.1% of its lifetime privacy budget left" in note["body"], note


def test_failing_deployment_run_notifies_without_raw_values(
    ui_server: tuple[str, dict[str, str]],
    receiver: Receiver,
    planted: Path,
    tiny_config: Path,
    tmp_path: Path,
) -> None:
    """A served deployment run failing the schema gate fires the failure automation; neither
    its logs (traceback included) nor the notification quote the planted value."""
    base, env = ui_server
    config = tmp_path / "gate.toml"
    config.write_text(TINY_CONFIG + '\n[[schema.columns]]\nname = "code"\nvalues = ["a", "b"]\n')
    serve = subprocess.Popen(
        [sys.executable, "-c", SERVE],
        env={**env, "PYTHONPATH": str(PROJECT)},
        cwd=PROJECT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        end = time.monotonic() + 300
        while not _api(base, "/api/deployments/filter", {}):
            assert serve.poll() is None, (
                serve.stderr.read().decode()[-3000:] if serve.stderr else ""
            )
            assert time.monotonic() < end, "the served deployment did not appear in 300 s"
            time.sleep(1)
        from prefect.deployments import run_deployment
        from prefect.settings import PREFECT_API_URL, temporary_settings

        with temporary_settings({PREFECT_API_URL: env["PREFECT_API_URL"]}):
            run = run_deployment(
                "sds-release/ui-failing",
                timeout=900,
                parameters={
                    "params": {
                        "input": str(planted),
                        "config": str(config),
                        "home": str(tmp_path / "home"),
                    }
                },
            )
        assert run.state is not None and run.state.is_failed(), run.state
        assert "SchemaValidationError" in (run.state.message or "")
    finally:
        serve.terminate()
        serve.wait(timeout=60)
    note = receiver.wait_for(f"release run {run.name} Failed")
    assert "SchemaValidationError" in note["body"] and PLANTED not in json.dumps(note)
    assert f"{base}/runs/flow-run/{run.id}" in note["body"]
    messages = _logs(base, str(run.id))
    assert any(m.startswith("budget: reserved") for m in messages)
    assert any("SchemaValidationError" in m for m in messages), "the failure is in the logs"
    assert PLANTED not in "\n".join(messages)


@pytest.mark.browser
def test_run_page_renders_logs_artifacts_and_budget_in_chromium(
    ui_server: tuple[str, dict[str, str]], cli_release: dict[str, Any], tmp_path: Path
) -> None:
    """Headless Chromium shows the run's stage logs, its artifacts and the budget table."""
    chromium = system_chromium()
    from playwright import sync_api

    base, _ = ui_server
    run_id = cli_release["run"]["id"]
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{base}/runs/flow-run/{run_id}", wait_until="networkidle")
            for line in ("budget: reserved", "aggregate-2: ", "normalize: ", "publish: "):
                page.get_by_text(line).first.wait_for(timeout=120_000)
            page.screenshot(path=str(tmp_path / "run-logs.png"))
            assert PLANTED not in page.inner_text("body")
            page.get_by_text("Artifacts", exact=True).first.click()
            for key in ("budget-ui", "release-ui", "privacy-spend-ui"):
                page.get_by_text(key).first.wait_for(timeout=60_000)
            page.goto(f"{base}/artifacts/key/budget-ui", wait_until="networkidle")
            page.get_by_text("Privacy budget of dataset ui").first.wait_for(timeout=60_000)
            page.locator("a[href*='/artifacts/artifact/']").first.click()  # the newest version
            for cell in ("lifetime", "reserved", "remaining", "9% of the lifetime budget"):
                page.get_by_text(cell, exact=True).first.wait_for(timeout=60_000)
            page.screenshot(path=str(tmp_path / "budget.png"))
        finally:
            browser.close()
