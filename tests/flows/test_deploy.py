"""``sds deploy`` before it reaches a server: the locked pool template, the pinned settings and
the refusals (no budget, no server, a bad schedule or input) that leave nothing behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sds_core.errors import SdsInputError
from sds_release.flows.local.deploy import (
    LOCKED_VARIABLES,
    DeployResult,
    DeploySettings,
    _schedule,
    deployment_names,
    locked_template,
    pin_settings,
)
from sds_release.store.ledger.book import Ledger
from tests.helpers import TINY_CONFIG, run_cli


@pytest.fixture
def tiny_csv(tmp_path: Path) -> Path:
    """An input file (deploy only checks that it exists)."""
    path = tmp_path / "tiny.csv"
    path.write_text("sex,age\n0,30\n")
    return path


@pytest.fixture
def tiny_config(tmp_path: Path) -> Path:
    """The tiny release config (dataset "tiny", with a [budget] table)."""
    path = tmp_path / "tiny.toml"
    path.write_text(TINY_CONFIG)
    return path


def test_the_locked_template_has_no_variables() -> None:
    """Command, environment and working directory are literals; the variables schema admits
    nothing, so the server refuses any job variable a run sends."""
    template = locked_template(Path("/srv/sds"), python="/opt/venv/bin/python")
    config = template["job_configuration"]
    assert "{{" not in json.dumps(config)
    assert config["command"] == "/opt/venv/bin/python -m prefect.engine"
    assert config["env"] == {"SDS_HOME": "/srv/sds"} and config["working_dir"] is None
    assert template["variables"] == LOCKED_VARIABLES
    assert LOCKED_VARIABLES == {"type": "object", "properties": {}, "additionalProperties": False}


def test_pinned_settings_are_absolute(
    tmp_path: Path, tiny_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Relative --input and --config become absolute paths (the worker runs in a temporary
    directory); a glob or URL input is kept as given."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.csv").write_text("a\n1\n")
    values = pin_settings(DeploySettings(tmp_path, input="data.csv", config="tiny.toml"))
    assert values == {
        "input": str(tmp_path / "data.csv"),
        "config": str(tiny_config),
        "ledger": None,
    }
    glob = pin_settings(DeploySettings(tmp_path, input="/data/part-*.parquet"))
    assert glob["input"] == "/data/part-*.parquet"


def test_series_is_pinned_only_when_asked(tmp_path: Path, tiny_csv: Path) -> None:
    """--series writes series = true in the pin files; without it the key is not written."""
    asked = pin_settings(DeploySettings(tmp_path, input=str(tiny_csv), series=True))
    assert asked["series"] is True
    assert "series" not in pin_settings(DeploySettings(tmp_path, input=str(tiny_csv)))


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        (DeploySettings(Path("/h")), "no input to deploy"),
        (DeploySettings(Path("/h"), input="/nowhere/x.csv"), "does not exist"),
    ],
)
def test_bad_inputs_are_refused(settings: DeploySettings, match: str) -> None:
    """No input, or one that does not exist, is refused naming the option."""
    with pytest.raises(SdsInputError, match=match):
        pin_settings(settings)


def test_a_ledger_password_is_never_pinned(monkeypatch: pytest.MonkeyPatch, tiny_csv: Path) -> None:
    """A ledger URL with a password (here from SDS_LEDGER_URL) is refused: pin files hold none."""
    monkeypatch.setenv("SDS_LEDGER_URL", "postgresql://sds:secret@db/ledger")
    with pytest.raises(SdsInputError, match="carries a password"):
        pin_settings(DeploySettings(Path("/h"), input=str(tiny_csv)))


@pytest.mark.parametrize(
    ("cron", "tz", "match"),
    [("0 2 * *", "UTC", "not a valid schedule"), ("0 2 * * *", "Mars/Olympus", "Mars/Olympus")],
)
def test_a_bad_schedule_is_one_message(cron: str, tz: str, match: str) -> None:
    """A cron or time zone Prefect would refuse is refused here, naming both options."""
    with pytest.raises(SdsInputError, match=match):
        _schedule(cron, tz)


def test_deployment_names_carry_the_dataset() -> None:
    """A home can deploy several datasets: each gets its own pair of deployments."""
    assert deployment_names("pums") == ("scheduled-pums", "on-demand-pums")


def test_deploy_refuses_a_dataset_without_budget(
    tmp_path: Path, tiny_csv: Path, tiny_config: Path
) -> None:
    """sds deploy of a dataset with no lifetime budget is refused (exit 2) naming sds budget
    set, although its config has a [budget]; no budget and no pin file are created."""
    home = tmp_path / "home"
    code, _, err = run_cli(
        "deploy", "--home", str(home), "--input", str(tiny_csv), "--config", str(tiny_config)
    )
    assert code == 2 and "sds budget set tiny" in err and "never creates one" in err
    assert Ledger.open(home).budget("tiny") is None
    assert not (home / "deployments").exists()


def test_deploy_without_a_server_says_how_to_get_one(
    tmp_path: Path, tiny_csv: Path, tiny_config: Path
) -> None:
    """Without PREFECT_API_URL and without the home's server: exit 2, naming both, nothing
    written."""
    home = tmp_path / "home"
    home.mkdir()
    Ledger.open(home).set_budget("tiny", epsilon=10, delta=1e-4)
    code, _, err = run_cli(
        "deploy", "--home", str(home), "--input", str(tiny_csv), "--config", str(tiny_config)
    )
    assert code == 2 and "PREFECT_API_URL" in err and "sds server start --home" in err
    assert not (home / "deployments").exists()


def test_the_worker_line_reads_the_home_servers_credential_from_its_file() -> None:
    """The printed worker command names the server and, for the home's authenticated server,
    reads the credential from its 0600 file instead of printing it."""
    own = DeployResult("http://h:4200/api", "sds-local", "created", (), (), "tiny")
    assert own.worker_command() == "PREFECT_API_URL=http://h:4200/api prefect worker start " \
        "--pool sds-local"  # fmt: skip
    home = DeployResult(
        "http://127.0.0.1:4200/api", "p", "unchanged", (), (), "tiny", Path("/h/private/auth")
    )
    assert home.worker_command() == (
        'PREFECT_API_URL=http://127.0.0.1:4200/api PREFECT_API_AUTH_STRING="$(cat '
        '/h/private/auth)" prefect worker start --pool p'
    )
