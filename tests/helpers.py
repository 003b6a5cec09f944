"""What the store, flow and end-to-end tests share: the tiny dataset's columns and config, and
running ``sds`` in-process (typer's CliRunner) or in a child process killed at a stage.

The fixtures built on these (``prefect_server``, ``tiny_csv``, ``tiny_config``, ``client``,
``home``) are in tests/conftest.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import prefect  # noqa: F401  (configure Prefect logging on the real stderr, not a CliRunner buffer)

PROJECT = Path(__file__).resolve().parents[1]
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
