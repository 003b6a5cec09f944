"""Pipeline test fixtures: one Prefect test server per session, a tiny dataset and its config.

The server (``prefect_test_harness``) is started only by tests that request ``prefect_server``;
everything else calls task bodies with ``.fn`` or the pure helpers. Runs are in-process
(typer's CliRunner) so the GX import and the server start are paid once.
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import prefect  # noqa: F401  (configure Prefect logging on the real stderr, not a CliRunner buffer)
import pytest

PROJECT = Path(__file__).resolve().parents[2]
EXAMPLE = PROJECT / "examples" / "pums_ca_10k.csv"
COLUMNS = ["sex", "age", "educ", "married", "inc_cat"]
N_ROWS = 400

TINY_CONFIG = """
dataset = "tiny"
epsilon = 2.0
reporting_length = 2
sensitive_zeros = ["sex", "married"]

[budget]
epsilon = 100.0
delta = 0.001

[schema]
min_rows = 10
max_rows = 100000

[[schema.columns]]
name = "sex"
values = ["0", "1"]
nullable = false

[[schema.columns]]
name = "age"
type = "integer"
min = 0
max = 120
bins = { edges = [0, 30, 50, 70, 121] }

[[schema.columns]]
name = "educ"
values = ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16"]

[[schema.columns]]
name = "married"
values = ["0", "1"]

[[schema.columns]]
name = "inc_cat"
values = ["less 10k", "10k-20k", "20k-30k", "30k-40k", "40k-50k", "50k-60k", "60k-80k",
          "80k-100k", "100k-150k", "above 150k"]
"""


@pytest.fixture(scope="session")
def prefect_server() -> Iterator[str]:
    """A temporary Prefect server for the whole session; yields its API URL."""
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield str(PREFECT_API_URL.value())


@pytest.fixture(scope="session")
def tiny_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """First N_ROWS rows of the example data, 5 columns (written once per session)."""
    path = tmp_path_factory.mktemp("data") / "tiny.csv"
    with open(EXAMPLE, newline="") as f, open(path, "w", newline="") as out:
        reader = csv.DictReader(f)
        writer = csv.writer(out)
        writer.writerow(COLUMNS)
        for i, row in enumerate(reader):
            if i == N_ROWS:
                break
            writer.writerow([row[c] for c in COLUMNS])
    return path


@pytest.fixture(scope="session")
def tiny_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The release config matching ``tiny_csv``."""
    path = tmp_path_factory.mktemp("config") / "tiny.toml"
    path.write_text(TINY_CONFIG)
    return path


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """An in-process Dask cluster of 2 single-thread workers (the Dask backend tests)."""
    distributed = pytest.importorskip("distributed")
    with distributed.Client(
        processes=False, n_workers=2, threads_per_worker=1, dashboard_address=None
    ) as c:
        yield c


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fresh SDS home."""
    return tmp_path / "home"


def killed_cli(stage: str, args: list[str], api_url: str) -> None:
    """``sds ARGS`` in a child process that SIGKILLs itself once ``stage`` is done
    (``SDS_TEST_KILL_AT``): the release is left as a crash would leave it."""
    env = {**os.environ, "SDS_TEST_KILL_AT": stage, "PREFECT_API_URL": api_url}
    proc = subprocess.run(
        [sys.executable, "-m", "flows.cli", *args],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        timeout=600,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]


def run_cli(*args: str) -> tuple[int, str, str]:
    """Run ``sds`` in-process; returns (exit code, stdout, stderr)."""
    from typer.testing import CliRunner

    from flows.cli import app

    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def charges(home: Path) -> list:
    """All ledger charge rows of a home (empty when no ledger)."""
    from release_store.ledger.book import Ledger

    if not (home / "ledger.sqlite").is_file():
        return []
    return Ledger.open(home).charges()


def complete_releases(home: Path) -> list[Path]:
    """Release directories whose manifest says complete."""
    import json

    root = home / "releases"
    return (
        [
            p.parent
            for p in root.glob("*/*/manifest.json")
            if json.loads(p.read_text()).get("status") == "complete"
        ]
        if root.is_dir()
        else []
    )


os.environ.setdefault("SDS_TEST", "1")
