"""What the store, flow and end-to-end tests share: the tiny dataset's columns and config, and
running ``sds`` in-process (typer's CliRunner) or in a child process killed at a stage.

The fixtures built on these (``prefect_server``, ``tiny_csv``, ``tiny_config``, ``client``,
``home``) are in tests/conftest.py.
"""

from __future__ import annotations

import contextlib
import csv
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import prefect  # noqa: F401  (configure Prefect logging on the real stderr, not a CliRunner buffer)
import pytest

PROJECT = Path(__file__).resolve().parents[1]
EXAMPLE = PROJECT / "examples" / "pums_ca_10k.csv"
COLUMNS = ["sex", "age", "educ", "married", "inc_cat"]
N_ROWS = 400

TINY_CONFIG = """
dataset = "tiny"
epsilon = 2.0
reporting_length = 2
synthesis = "records"
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
        [sys.executable, "-m", "sds_release.flows.cli", *args],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        timeout=600,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]


def write_tiny_csv(path: Path, rows: int = N_ROWS) -> Path:
    """The first ``rows`` rows of the example data, the tiny columns (:data:`COLUMNS`)."""
    with open(EXAMPLE, newline="") as f, open(path, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(COLUMNS)
        for i, row in enumerate(csv.DictReader(f)):
            if i == rows:
                break
            writer.writerow([row[c] for c in COLUMNS])
    return path


def run_cli(*args: str) -> tuple[int, str, str]:
    """Run ``sds`` in-process; returns (exit code, stdout, stderr)."""
    from typer.testing import CliRunner

    from sds_release.flows.cli import app

    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def charges(home: Path) -> list:
    """All ledger charge rows of a home (empty when no ledger)."""
    from sds_release.store.ledger.book import Ledger

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


CHROMIUM = Path(os.environ.get("SDS_CHROMIUM", "/usr/bin/chromium"))


def system_chromium() -> str:
    """Debian's Chromium, driven through Playwright by the browser tests (no browser download).

    One rule for every browser test: `make test` (and so CI) installs both, so a missing one
    FAILS the test, naming the fix; `make test-fast` runs no browser test.
    """
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.fail("playwright is not installed: run `make setup` (pip install -e '.[browser]')")
    if not CHROMIUM.is_file():
        pytest.fail(
            f"{CHROMIUM} (Debian's chromium) is not installed: run `make chromium` as root "
            "(apt-get install chromium), or point SDS_CHROMIUM at a Chromium binary"
        )
    return str(CHROMIUM)


@contextlib.contextmanager
def chromium_browser() -> Iterator[Any]:
    """Headless system Chromium (:func:`system_chromium`) through Playwright.

    Start it after the releases a module makes: Playwright's sync API runs an event loop in
    this thread, and a Prefect flow called inside a running loop would run asynchronously.
    """
    chromium = system_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        yield b
        b.close()


class FilePage:
    """A page opened from disk, recording console errors, page errors and requests."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page = browser.new_page()
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.url = path.as_uri()
        self.page.goto(self.url)

    def clean(self) -> None:
        """No error, and the only request was the page itself."""
        assert self.errors == []
        assert self.requests == [self.url]


def periodic_config(*, subject: bool = False) -> str:
    """``TINY_CONFIG`` for the periodic copy of the tiny data (:func:`write_periodic_csv`):
    dataset ``monthly``, ``period_column = "month"``, the tiny columns released (``pid`` is not),
    no default budget (``sds budget set monthly --epsilon E --per-period`` sets one); with
    ``subject``, ``pid`` is the subject id."""
    head, tables = TINY_CONFIG.split("\n[budget]", 1)
    extra = 'period_column = "month"\n' + f"use_columns = {COLUMNS!r}\n".replace("'", '"')
    schema = tables.split("[schema]", 1)[1]
    if subject:  # the gate checks the subject id's column too
        extra += 'subject_id = "pid"\n'
        schema += '\n[[schema.columns]]\nname = "pid"\nnullable = false\n'
    return head.replace('dataset = "tiny"', 'dataset = "monthly"') + extra + "\n[schema]" + schema


def write_periodic_csv(
    tiny_csv: Path, path: Path, periods: dict[str, range], *, subjects: dict[str, range]
) -> Path:
    """The tiny data with a ``month`` column first and a subject id ``pid``: period ``p`` holds
    the tiny rows ``periods[p]`` with subjects ``s{i}`` for i in ``subjects[p]`` (one row
    each), so a subject in two periods' ranges has rows in both."""
    import csv

    with open(tiny_csv, newline="") as f:
        rows = list(csv.reader(f))
    header, data = rows[0], rows[1:]
    with open(path, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["month", "pid", *header])
        for period, span in periods.items():
            for i, j in zip(span, subjects[period], strict=True):
                writer.writerow([period, f"s{j}", *data[i % len(data)]])
    return path


SEEDED = "sds: warning: NOT PRIVATE"
"""The first words of the warning a seeded release prints (sds_release.store.run.claims)."""


def unseeded(stderr: str) -> str:
    """``stderr`` without the NOT PRIVATE warning of a seeded release (tests use fixed seeds)."""
    return "".join(line for line in stderr.splitlines(True) if not line.startswith(SEEDED))


def anonymeter_env() -> Path:
    """The Python of anonymeter's environment (`make anonymeter`), for the privacy-risk tests.

    `make test` (and so CI, where ``CI`` is set) builds it first, so there a missing one FAILS
    the test, naming the fix; elsewhere (``make test-fast``, a single test file) the test skips
    with that reason: the environment is ~250 MB and `make setup` leaves it out.
    """
    from sds_core.errors import SdsInputError
    from sds_release.store.compare import anonymeter_python

    try:
        return anonymeter_python()
    except SdsInputError as e:
        if os.environ.get("CI"):
            pytest.fail(f"under CI: {e}")
        pytest.skip(f"no anonymeter environment: {e}")


AUG, SEP, OCT = "2026-08", "2026-09", "2026-10"
"""The three months of :func:`history_home`."""


def history_home(root: Path, tiny_csv: Path) -> dict[str, object]:
    """A home with one of each kind of release the audit page and the series show, of dataset
    ``monthly`` (a budget of ε 2 per period), in this order:

    - ``aug-1``: August from the command line (300 rows, seed 5);
    - ``sep-1``: September (200 rows, seed 5) from the command line, failed in aggregate-2
      (count and aggregate-1 charged, its reservation open), then ``sds resume``: complete;
    - October (300 rows) by a run of the deployment ``on-demand-monthly`` (its name given to
      the Prefect runtime as a deployed run sees it), whose pin file sets ``series = true``;
    - ``aug-2``: August again from the command line: refused, the period's budget is spent.

    Returns the home, the input, the config, the release directories by period and the
    October series folder the deployment wrote. Needs the ``prefect_server`` fixture.
    """

    from sds_core.marginals import engine
    from sds_release.flows.deployed import deployed_release
    from sds_release.store.config.deployment import RunOptions, pin_path, write_pins

    data = write_periodic_csv(
        tiny_csv,
        root / "monthly.csv",
        {AUG: range(0, 300), SEP: range(300, 500), OCT: range(100, 400)},
        subjects={AUG: range(0, 300), SEP: range(300, 500), OCT: range(500, 800)},
    )
    config = root / "monthly.toml"
    config.write_text(periodic_config())
    home = root / "home"
    code, _, err = run_cli(
        "budget", "set", "monthly", "--epsilon", "2", "--delta", "1e-3", "--per-period",
        "--home", str(home),
    )  # fmt: skip
    assert code == 0, err
    common = ["--config", str(config), "--home", str(home), "--seed", "5", "--quiet"]
    dirs: dict[str, Path] = {}
    code, out, err = run_cli(
        "release", str(data), *common, "--period", AUG, "--release-id", "aug-1"
    )
    assert code == 0, err
    dirs[AUG] = Path(out.strip().splitlines()[-1])

    real = engine.aggregate_length

    def fail_at_two(backend: Any, k: int, *args: Any, **kwargs: Any) -> Any:
        if k == 2:
            raise RuntimeError("injected failure in aggregate-2")
        return real(backend, k, *args, **kwargs)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(engine, "aggregate_length", fail_at_two)
        code, _, err = run_cli(
            "release", str(data), *common, "--period", SEP, "--release-id", "sep-1"
        )
        assert code == 1 and "injected failure" in err, err
    code, out, err = run_cli("resume", "sep-1", "--home", str(home), "--quiet")
    assert code == 0, err
    dirs[SEP] = Path(out.strip().splitlines()[-1])

    write_pins(
        pin_path(home, "on-demand-monthly"),
        {"input": str(data), "config": str(config), "period": OCT, "series": True},
        "the history home's deployment",
    )
    with pytest.MonkeyPatch.context() as m:
        m.setenv("SDS_HOME", str(home))
        m.setenv("PREFECT__RUNTIME__DEPLOYMENT__NAME", "on-demand-monthly")
        dirs[OCT] = Path(deployed_release(RunOptions()))

    code, _, err = run_cli("release", str(data), *common, "--period", AUG, "--release-id", "aug-2")
    assert code == 1 and "has only" in err, err
    return {
        "home": home,
        "data": data,
        "config": config,
        "dirs": dirs,
        "deployed_series": home / "series" / "monthly" / OCT,
    }


def clear_of_a_month_change(within: timedelta) -> datetime:
    """Now (UTC), once no new month begins in the next ``within``: a test whose release
    resolves ``previous-month`` at its own start, later than the test computed the month,
    first sleeps past a month change that close (at most ``within``, once a month), so both
    name the same month whenever the suite runs."""
    now = datetime.now(UTC)
    first = datetime(now.year + now.month // 12, now.month % 12 + 1, 1, tzinfo=UTC)
    if first - now < within:
        time.sleep((first - now).total_seconds() + 1)
        now = datetime.now(UTC)
    return now
