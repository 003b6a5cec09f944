"""The budget dashboard rows and events (sds_release.store.ledger.budget_view), the stage log lines
(sds_release.store.run.stage_log) and the CLI's Prefect logging defaults; no Prefect server
needed."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from contextlib import nullcontext as does_not_raise
from pathlib import Path
from typing import Any

import pytest

from sds_core.errors import SdsInputError
from sds_release.store.ledger.book import Ledger
from sds_release.store.ledger.budget_view import BudgetView, artifact_key, check_share
from sds_release.store.ledger.values import PlannedCharge
from sds_release.store.run import stage_log
from sds_release.store.run.release_run import ReleaseRun
from tests.helpers import PROJECT

PLAN = [PlannedCharge("count", "laplace", 0.5), PlannedCharge("aggregate-1", "laplace", 1.5)]


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    """A ledger with dataset 'pums' (ε=10): r1 complete (ε=2), r2 open with one stage drawn."""
    led = Ledger.open(tmp_path)
    led.set_budget("pums", epsilon=10.0, delta=1e-5)
    led.reserve("pums", "r1", PLAN)
    for stage in ("count", "aggregate-1"):
        led.charge("r1", stage)
    led.complete("r1")
    led.reserve("pums", "r2", PLAN)
    led.charge("r2", "count")
    return led


def test_view_rows_show_budget_then_newest_releases(ledger: Ledger) -> None:
    """Lifetime, spent, reserved, remaining, then releases newest first with what they spent."""
    view = BudgetView.load(ledger, "pums")
    assert view is not None
    rows = view.rows()
    assert [r["entry"] for r in rows] == [
        "lifetime",
        "spent",
        "reserved",
        "remaining",
        "runway",
        "release r2",
        "release r1",
    ]
    by = {r["entry"]: r for r in rows}
    assert (by["lifetime"]["ε"], by["spent"]["ε"], by["reserved"]["ε"]) == ("10", "2.5", "1.5")
    assert by["remaining"]["ε"] == "6" and by["remaining"]["status"] == "60% of the lifetime budget"
    assert by["release r1"]["status"].startswith("completed") and by["release r1"]["ε"] == "2"
    assert by["release r2"]["status"].startswith("open") and by["release r2"]["ε"] == "0.5"
    assert view.remaining_share == pytest.approx(0.6)
    assert view.payload()["remaining_share"] == pytest.approx(0.6)
    assert "ε 6 of 10 left (60%" in view.description()


def test_runway_counts_releases_of_the_last_size(ledger: Ledger) -> None:
    """The runway is remaining ε over the last release's ε (6 / 2 = 3), within the policy,
    in the rows, the description, the events' payload and `sds budget show`."""
    view = BudgetView.load(ledger, "pums")
    assert view is not None and view.runway == 3
    runway = next(r for r in view.rows() if r["entry"] == "runway")
    assert runway["ε"] == "2" and runway["status"].startswith("3 more release(s)")
    assert "pays for 3 more release(s)" in view.description()
    assert view.payload()["releases_left"] == 3
    ledger.set_budget("pums", epsilon=10.0, delta=1e-5, max_epsilon_per_release=1.0)
    assert BudgetView.load(ledger, "pums").runway == 0  # type: ignore[union-attr]
    fresh = Ledger.open(ledger.path.parent / "other")  # type: ignore[union-attr]
    fresh.set_budget("new", epsilon=5.0, delta=1e-5)
    view = BudgetView.load(fresh, "new")
    assert (
        view is not None
        and view.runway is None
        and "runway" not in {r["entry"] for r in view.rows()}
    )


def test_view_of_unknown_dataset_is_none(ledger: Ledger) -> None:
    """A dataset without a budget has no dashboard."""
    assert BudgetView.load(ledger, "nope") is None


def test_view_keeps_only_the_last_releases(ledger: Ledger) -> None:
    """``last`` bounds the release rows (the budget rows always stay)."""
    view = BudgetView.load(ledger, "pums", last=1)
    assert view is not None and [r["entry"] for r in view.rows()][4:] == ["runway", "release r2"]


def test_remaining_share_is_the_smaller_of_epsilon_and_delta(tmp_path: Path) -> None:
    """A release that uses most of δ makes δ the binding share."""
    led = Ledger.open(tmp_path)
    led.set_budget("d", epsilon=10.0, delta=1e-5)
    led.reserve("d", "r", [PlannedCharge("count", "gaussian", 1.0, 9e-6)])
    view = BudgetView.load(led, "d")
    assert view is not None and view.remaining_share == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("dataset", "key"),
    [("pums", "budget-pums"), ("PUMS_ca.10k", "budget-pums-ca-10k"), ("é", "budget--")],
)
def test_artifact_key_is_prefect_safe(dataset: str, key: str) -> None:
    """Artifact keys hold lowercase ASCII letters, digits and dashes only."""
    assert artifact_key("budget", dataset) == key


@pytest.mark.parametrize(
    ("value", "expect"),
    [
        (0.2, does_not_raise()),
        ("0", does_not_raise()),
        (1, does_not_raise()),
        (1.5, pytest.raises(SdsInputError, match=r"1\.5.*between 0 and 1")),
        ("lots", pytest.raises(SdsInputError, match=r"'lots'.*from here")),
        (None, pytest.raises(SdsInputError, match="None")),
    ],
)
def test_check_share(value: Any, expect: Any) -> None:
    """The alert share must be a number in [0, 1]; the error names the value and its source."""
    with expect:
        check_share(value, source="here")


class Captured:
    """A StageLogger that keeps the formatted lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, msg: str, *args: Any) -> None:
        """Keep one line."""
        self.lines.append(msg % args)


def _run(ledger: Ledger, release_id: str) -> ReleaseRun:
    from sds_release.store.config.release_params import ReleaseParams

    params = ReleaseParams(input="x.csv", dataset="pums", epsilon=2.0, delta=1e-6)
    return ReleaseRun(params, release_id, str(ledger.path.parent))


def test_stage_done_reports_the_ledger_charge(ledger: Ledger) -> None:
    """A charged stage's line carries its ε, δ and mechanism; an uncharged one says so."""
    log = Captured()
    run = _run(ledger, "r2")
    stage_log.stage_done(log, run, "count", "DP record count m=12")
    stage_log.stage_done(log, run, "aggregate-1", "3 DP combinations")
    assert log.lines == [
        "count: DP record count m=12; charged ε=0.5 δ=0 (laplace)",
        "aggregate-1: 3 DP combinations; no budget charged",
    ]


def test_stage_done_says_when_a_stage_was_resumed(ledger: Ledger) -> None:
    """A stage loaded from its checkpoint says it drew no new noise."""
    log = Captured()
    stage_log.stage_done(log, _run(ledger, "r1"), "count", "m=12", resumed=True)
    assert log.lines == [
        "count: resumed from its checkpoint, no new noise (charged ε=0.5 δ=0 (laplace)); m=12"
    ]


def test_finished_reads_the_checkpoint_state(tmp_path: Path) -> None:
    """A stage counts as finished once its checkpoint is recorded."""
    led = Ledger.open(tmp_path)
    run = _run(led, "r9")
    assert not stage_log.finished(run, "count")
    run.dirs.paths.create(exist_ok=True)
    run.dirs.save_checkpoint("count", 5)
    assert stage_log.finished(run, "count") and not stage_log.finished(run, "aggregate-1")


def test_gate_text_counts_failures() -> None:
    """A partly failing summary reports how many expectations passed of how many."""
    text = stage_log.gate_text([{"success": True}, {"success": False}], "input")
    assert text == "the input passed 1 expectations of 2"


def _env_after_cli_defaults(*args: str) -> dict[str, str]:
    code = (
        "import json, os, pathlib; from sds_release.flows.local.launch import prefect_environment; "
        f"prefect_environment(pathlib.Path('h'){''.join(args)}); "
        "print(json.dumps({k: v for k, v in os.environ.items() if k.startswith('PREFECT_')}))"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, "PYTHONPATH": str(PROJECT)},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return dict(json.loads(out.stdout))


def test_cli_sends_info_logs_to_prefect_and_keeps_the_console_quiet() -> None:
    """sds logs at INFO (the server gets every stage line) but the console shows none."""
    env = _env_after_cli_defaults()
    assert env["PREFECT_LOGGING_LEVEL"] == "INFO"
    assert env["PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"] == "CRITICAL"
    assert env.get("PREFECT_LOGGING_TO_API_ENABLED", "true") == "true"


def test_cli_verbose_shows_the_stage_logs_on_the_console() -> None:
    """--verbose lowers the console handler to INFO."""
    env = _env_after_cli_defaults(", verbose=True")
    assert env["PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"] == "INFO"
    assert logging.getLevelName(env["PREFECT_LOGGING_LEVEL"]) == logging.INFO
