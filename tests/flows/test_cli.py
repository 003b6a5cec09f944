"""The sds CLI without a flow run: lazy imports, budget commands, audit, evaluate, env defaults."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import PROJECT, run_cli


def test_help_does_not_import_prefect_or_gx() -> None:
    """`sds --help` loads neither Prefect, Great Expectations nor pandas (it stays fast)."""
    code = (
        "import sys; from typer.testing import CliRunner; from sds_release.flows.cli import app; "
        "r = CliRunner().invoke(app, ['--help']); assert r.exit_code == 0, r.output; "
        "assert 'release' in r.output; "
        "bad = [m for m in ('prefect', 'great_expectations', 'pandas') if m in sys.modules]; "
        "assert not bad, bad"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=PROJECT, capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]


def test_budget_set_and_show(home: Path) -> None:
    """budget set records a lifetime budget; budget show --json reports it with nothing spent."""
    code, out, _ = run_cli(
        "budget", "set", "census", "--epsilon", "10", "--delta", "1e-5", "--home", str(home)
    )
    assert code == 0 and "remaining ε=10" in out
    code, out, _ = run_cli("budget", "show", "census", "--json", "--home", str(home))
    assert code == 0
    [row] = json.loads(out)
    assert row["epsilon_lifetime"] == 10 and row["epsilon_spent"] == 0


@pytest.mark.parametrize("columns", [None, "40"])
def test_budget_show_through_a_pipe(home: Path, columns: str | None) -> None:
    """`sds budget show | cat` prints full column names and each dataset on one line."""
    run_cli(
        "budget", "set", "census_households", "--epsilon", "4",
        "--max-epsilon-per-release", "1", "--home", str(home),
    )  # fmt: skip
    run_cli(
        "budget", "set", "monthly_survey", "--epsilon", "2", "--per-period",
        "--lifetime-epsilon", "6", "--home", str(home),
    )  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    env.pop("COLUMNS", None)
    if columns is not None:
        env["COLUMNS"] = columns
    done = subprocess.run(
        [sys.executable, "-m", "sds_release.flows.cli", "budget", "show", "--home", str(home)],
        cwd=PROJECT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    header = lines[0].split()
    for name in ("dataset", "period", "budget", "reserved", "runway", "per-release", "policy"):
        assert name in header, lines[0]
    [census] = [line for line in lines if "census_households" in line]
    assert "lifetime ε 4, δ 1e-05" in census and "ε ≤ 1 per release" in census
    [monthly] = [line for line in lines if "monthly_survey" in line]
    assert "per period (lifetime cap ε 6 across periods)" in monthly
    assert "…" not in done.stdout


def test_budget_show_unknown_dataset(home: Path) -> None:
    """Showing a dataset without a budget says how to set one."""
    code, _, err = run_cli("budget", "show", "nobody", "--home", str(home))
    assert code == 1 and "sds budget set nobody" in err


def test_budget_set_rejects_zero(home: Path) -> None:
    """A lifetime ε of 0 is refused naming the option."""
    code, _, err = run_cli("budget", "set", "census", "--epsilon", "0", "--home", str(home))
    assert code == 2 and "--epsilon" in err


def test_audit_of_empty_home(home: Path) -> None:
    """Auditing an empty home succeeds and finds no problem."""
    code, out, _ = run_cli("audit", "--verify", "--json", "--home", str(home))
    assert code == 0
    assert json.loads(out)["releases"] == []


def test_resume_unknown_release(home: Path) -> None:
    """Resuming an id that was never started names the id and the home."""
    code, _, err = run_cli("resume", "no-such-release", "--home", str(home))
    assert code == 2 and "no-such-release" in err


def test_missing_dataset_id(tiny_csv: Path, home: Path) -> None:
    """Without --dataset or a config the release is refused before anything happens."""
    code, _, err = run_cli("release", str(tiny_csv), "--home", str(home))
    assert code == 2 and "--dataset" in err
    assert not (home / "ledger.sqlite").exists()


def test_evaluate_identical_tables(tiny_csv: Path) -> None:
    """A table against itself: zero TVD, nothing suppressed or fabricated, labelled not DP."""
    code, out, _ = run_cli(
        "evaluate", str(tiny_csv), str(tiny_csv), "--reporting-length", "2", "--json"
    )
    assert code == 0
    result = json.loads(out)
    assert result["differentially_private"] is False and "NOT differentially" in result["note"]
    fid, agg = result["marginal_fidelity"], result["aggregates"]
    assert all(v == pytest.approx(0.0) for v in fid["tvd_mean_by_order"].values())
    assert set(fid["tvd_mean_by_order"]) == {"1", "2"}
    assert (agg["suppressed_pct"], agg["fabricated_pct"], agg["mean_error"]) == (0.0, 0.0, 0.0)
    assert set(agg["by_length"]) == {"1", "2"}
    assert agg["record_expansion_pct"] == 0.0


def test_evaluate_text_summary(tiny_csv: Path, tmp_path: Path) -> None:
    """The text form says it is not DP and reports suppression per length and TVD per order."""
    rows = tiny_csv.read_text().splitlines()
    half = tmp_path / "half.csv"
    half.write_text("\n".join(rows[: len(rows) // 2]) + "\n")
    code, out, _ = run_cli("evaluate", str(tiny_csv), str(half), "--reporting-length", "2")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("NOT differentially private")
    assert any(ln.split()[:1] == ["2"] for ln in lines)  # the length-2 row
    assert "mean total variation distance of 2-way marginals" in out
    assert "suppressed" in out and "fabricated" in out


def test_evaluate_bad_input(tiny_csv: Path, tmp_path: Path) -> None:
    """A missing synthetic file or mismatched columns fail with one paragraph, exit 2."""
    code, _, err = run_cli("evaluate", str(tiny_csv), str(tmp_path / "none.csv"))
    assert code == 2 and "none.csv' does not exist" in err
    other = tmp_path / "other.csv"
    other.write_text("x,y\n1,2\n")
    code, _, err = run_cli("evaluate", str(tiny_csv), str(other))
    assert code == 2 and "columns differ" in err


def test_prefect_environment_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI fills hermetic Prefect defaults only where the user set nothing."""
    from sds_release.flows.local.launch import prefect_environment

    monkeypatch.setenv("PREFECT_API_URL", "")
    monkeypatch.delenv("PREFECT_HOME", raising=False)
    monkeypatch.setenv("PREFECT_LOGGING_LEVEL", "DEBUG")
    monkeypatch.delenv("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", raising=False)
    monkeypatch.delenv("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", raising=False)
    monkeypatch.delenv("DO_NOT_TRACK", raising=False)
    prefect_environment(tmp_path)
    assert "PREFECT_API_URL" not in os.environ
    assert os.environ["PREFECT_HOME"] == str(tmp_path / "prefect")
    assert os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] == "180"
    assert os.environ["PREFECT_LOGGING_LEVEL"] == "DEBUG"
    assert os.environ["PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"] == "CRITICAL"
    assert os.environ["DO_NOT_TRACK"] == "1"


@pytest.mark.parametrize("asked", [None, "PREFECT_FLOWS_HEARTBEAT_FREQUENCY"])
def test_release_run_heartbeats(asked: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's flow run has no heartbeat thread (its join ended runs up to 1 s late), unless
    the user asked for heartbeats; Prefect's setting is back afterwards."""
    from prefect.settings import get_current_settings

    from sds_release.flows.local.launch import HEARTBEAT_ENV, _no_heartbeats

    for name in HEARTBEAT_ENV:
        monkeypatch.delenv(name, raising=False)
    if asked:
        monkeypatch.setenv(asked, "60")
    before = get_current_settings().flows.heartbeat_frequency
    assert before is not None  # Prefect 3.9's default (180 s) or the test profile's
    with _no_heartbeats():
        inside = get_current_settings().flows.heartbeat_frequency
    assert inside == (before if asked else None)
    assert get_current_settings().flows.heartbeat_frequency == before
