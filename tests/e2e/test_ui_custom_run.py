"""A release started as a custodian starts one: the Prefect UI's Run ▸ Custom run form, in Chromium.

The home's own server (`sds server start`: it requires the home's API credential), `sds deploy`
of the tiny dataset onto a locked pool, and a real `prefect worker start`. Debian's Chromium,
driven by Playwright, logs in with the credential read from the home, opens the on-demand
deployment, fills ε in the form Prefect generates from `RunOptions` and submits; the worker runs
the release. The run's logs, the `budget-tiny` artifact and the ledger then show that release,
with the ε typed in. The filled form's screenshot is kept in the test's tmp dir, and every failure
message names it and a screenshot of the page at the failure.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sds_release.flows.local.server import AUTH_ENV, AUTH_FILE
from sds_release.store.config.deployment import RunOptions
from sds_release.store.ledger.book import Ledger
from tests.e2e.prefect_processes import client_env, free_port, worker
from tests.helpers import PROJECT, system_chromium

pytestmark = [pytest.mark.browser, pytest.mark.server, pytest.mark.slow]

POOL = "sds-ui-form"
DATASET = "tiny"
DEPLOYMENT = f"on-demand-{DATASET}"
EPSILON = 2.5  # typed into the form; the config's ε is 2 (below 2, 1-2% of tiny releases end empty)
PREFECT = [sys.executable, "-m", "prefect"]
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


@dataclass(frozen=True)
class ServedHome:
    """A home whose own server has the deployments of `sds deploy`, a worker serving its pool."""

    home: Path
    ui: str  # http://127.0.0.1:PORT
    auth: str  # the home's API credential, as the custodian types it into the login page


def _sds(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "sds_release.flows.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"sds {' '.join(args)}: {done.stdout}{done.stderr}"
    return done


@pytest.fixture
def served_home(tmp_path: Path, tiny_csv: Path, tiny_config: Path) -> Iterator[ServedHome]:
    """`sds server start` and `sds deploy` run outside the checkout (budget set first), and a
    worker of the pool with the home's credential; the server is stopped at the end."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir(mode=0o700)
    work.mkdir()
    Ledger.open(home).set_budget(DATASET, epsilon=100.0, delta=1e-3)
    # the home's server, as a custodian starts it (no PREFECT_API_URL); no warm release runner:
    # the worker runs the release
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "SDS_SERVER")}
    env |= {"SDS_RUNNER": "off", "PYTHONPATH": str(PROJECT)}
    port = free_port()
    _sds("server", "start", "--home", str(home), "--port", str(port), env=env, cwd=work)
    try:
        # a schedule that does not fire during the test (1 January), so the one run is the form's
        deployed = _sds(
            "deploy", "--home", str(home), "--pool", POOL, "--cron", "0 0 1 1 *",
            "--input", str(tiny_csv), "--config", str(tiny_config),
            env=env, cwd=work,
        )  # fmt: skip
        assert f"deployment sds-release/{DEPLOYMENT}" in deployed.stdout
        auth = (home / AUTH_FILE).read_text().strip()
        url = f"http://127.0.0.1:{port}"
        worker_env = client_env(f"{url}/api", tmp_path / "worker-prefect") | {AUTH_ENV: auth}
        with worker(PREFECT, POOL, worker_env, work):
            yield ServedHome(home, url, auth)
    finally:
        _sds("server", "stop", "--home", str(home), env=env, cwd=work)


def _api(served: ServedHome, path: str, body: Any = None) -> Any:
    """The home's API, with its credential (HTTP basic authentication)."""
    token = base64.b64encode(served.auth.encode()).decode()
    request = urllib.request.Request(
        f"{served.ui}/api{path}",
        data=None if body is None else json.dumps(body).encode(),
        method="GET" if body is None else "POST",
        headers={"Content-Type": "application/json", "Authorization": f"Basic {token}"},
    )
    with urllib.request.urlopen(request, timeout=30) as r:
        return json.load(r)


def _logs(served: ServedHome, run_id: str) -> str:
    """Every log line of the run, oldest first."""
    body = {
        "logs": {"flow_run_id": {"any_": [run_id]}},
        "sort": "TIMESTAMP_ASC",
        "limit": 200,
    }
    return "\n".join(line["message"] for line in _api(served, "/logs/filter", body))


def _wait_final(served: ServedHome, run_id: str, timeout: float = 900) -> str:
    """The run's final state type (the worker runs it; the UI is checked afterwards)."""
    end = time.monotonic() + timeout
    state = None
    while time.monotonic() < end:
        state = _api(served, f"/flow_runs/{run_id}")["state_type"]
        if state in FINAL:
            return str(state)
        time.sleep(2)
    raise AssertionError(f"flow run {run_id} not final within {timeout:.0f} s: {state}")


@contextmanager
def _screenshots_on_failure(page: Any, form: Path, tmp_path: Path) -> Iterator[None]:
    """Any failure inside names the filled form's screenshot and one of the page as it failed."""
    try:
        yield
    except Exception as e:
        now = tmp_path / "page-at-failure.png"
        try:
            page.screenshot(path=str(now), full_page=True)
        except Exception as shot:  # the browser may be gone: say so instead
            now = Path(f"(no screenshot: {shot})")
        kept = form if form.is_file() else Path("(the form was not filled)")
        raise AssertionError(
            f"{type(e).__name__}: {e}\nscreenshot of the filled Custom run form: {kept}\n"
            f"screenshot of the page at the failure: {now}"
        ) from e


def _submit_custom_run(page: Any, served: ServedHome, form: Path) -> str:
    """Log in, open the deployment's Custom run form, set ε, submit; the new run's id."""
    page.goto(served.ui, wait_until="networkidle")  # the UI asks for the credential first
    page.get_by_placeholder("admin:pass").fill(served.auth)
    page.get_by_role("button", name="Login").click()
    page.wait_for_url("**/dashboard**")
    page.get_by_role("link", name="Deployments").first.click()
    page.get_by_role("link", name=DEPLOYMENT, exact=True).click()
    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Custom run").click()
    # RunOptions.epsilon (float | None) is a field with a float/None switch, None by default
    label = page.locator("label", has_text="Epsilon (Optional)")
    epsilon = page.locator("div.group").filter(has=label).last  # the innermost: the field
    epsilon.get_by_role("tab", name="float").click()
    epsilon.locator("input[type=number]").fill(str(EPSILON))
    page.screenshot(path=str(form), full_page=True)
    for _ in range(3):  # a busy server answers 503 (its SQLite is locked): submit again
        with page.expect_response(
            lambda r: r.request.method == "POST" and r.url.endswith("/create_flow_run")
        ) as created:
            page.get_by_role("button", name="Submit").click()
        response = created.value
        if response.status != 503:
            break
        page.wait_for_timeout(3000)
    assert response.status == 201, response.text()
    return str(response.json()["id"])


def test_custom_run_form_releases_with_the_epsilon_typed_in(
    served_home: ServedHome, tmp_path: Path
) -> None:
    """The Custom run form, filled in Chromium with ε = 2.5 and submitted, starts a run the
    worker completes: its only non-empty option is that ε; its logs say what it chose and reserve
    ε = 2.5; the budget-tiny artifact lists the release with ε 2.5; the ledger closed that
    release, started by that run, having spent ε = 2.5; the release is published."""
    chromium = system_chromium()
    from playwright import sync_api

    served = served_home
    form = tmp_path / "custom-run-form.png"
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            with _screenshots_on_failure(page, form, tmp_path):
                run_id = _submit_custom_run(page, served, form)
                # the form sends every option, the empty ones as null (= the deployment's value)
                options = _api(served, f"/flow_runs/{run_id}")["parameters"]["options"]
                assert {k: v for k, v in options.items() if v is not None} == {"epsilon": EPSILON}
                assert set(options) == set(RunOptions.model_fields)
                # the UI lists the new run on the deployment's page: open it from there
                page.locator(f"a[href$='/runs/flow-run/{run_id}']").first.click()
                final = _wait_final(served, run_id)
                # the run's last lines (publish's) are shipped in the background after it ends
                shipped = time.monotonic() + 60
                logs = _logs(served, run_id)
                while f"the release is (ε={EPSILON}, δ=" not in logs and time.monotonic() < shipped:
                    time.sleep(1)
                    logs = _logs(served, run_id)
                assert final == "COMPLETED", logs[-3000:]
                page.reload(wait_until="networkidle")
                page.get_by_text("Completed", exact=True).first.wait_for(timeout=60_000)
                # logs: what the run chose, and the reservation of the release
                page.get_by_role("tab", name="Logs").click()
                chose = f"this run chose {{'epsilon': {EPSILON}}}"
                page.get_by_text(chose).first.wait_for(timeout=60_000)
                reserved = re.search(
                    rf"budget: reserved ε={EPSILON} δ=(\S+) for release (\S+) of dataset {DATASET}",
                    logs,
                )
                assert reserved, logs[-3000:]
                delta, release_id = reserved.groups()
                page.get_by_text(reserved.group(0)).first.wait_for(timeout=60_000)
                assert f"the release is (ε={EPSILON}, δ=" in logs
                # the budget artifact of the run: the release's row, with the ε typed in
                page.get_by_role("tab", name="Artifacts").click()
                page.locator("a[href*='/artifacts/artifact/']").filter(
                    has_text=f"budget-{DATASET}"
                ).first.click()
                row = page.locator("tr").filter(has_text=f"release {release_id}")
                row.first.wait_for(timeout=60_000)
                cells = [c.strip() for c in row.first.locator("td").all_inner_texts()]
                assert cells[:4] == [
                    f"release {release_id}",
                    f"{EPSILON:g}",
                    delta,
                    f"completed (reserved ε={EPSILON:g})",
                ], cells
                page.screenshot(path=str(tmp_path / "budget-artifact.png"), full_page=True)
        finally:
            browser.close()
    # the ledger: the release that run reserved, closed, ε = 2.5 spent; the release published
    ledger = Ledger.open(served.home)
    reservation = ledger.reservation(release_id)
    assert reservation is not None and reservation.flow_run_id == run_id
    assert (reservation.status, reservation.epsilon) == ("completed", EPSILON)
    spent = ledger.spent(release_id)
    assert spent is not None and spent[0] == pytest.approx(EPSILON)
    manifest = served.home / "releases" / DATASET / release_id / "manifest.json"
    assert json.loads(manifest.read_text())["status"] == "complete"
