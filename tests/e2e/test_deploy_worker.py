"""Deployments served by a process worker: runs submitted through the API cannot change what is
read, which budget pays, or what the worker executes; an allowed run completes, charged once.

`sds deploy` (module-path deployments of the installed package) and deployments/prefect.yaml (a
clone, pins and pool from `sds deploy --no-register`), each on a locked pool served by a real
`prefect worker start`, against a real `prefect server start`.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sds_release.store.audit.journal import read_journal
from sds_release.store.config.deployment import PINNED, pin_path, write_pins
from sds_release.store.ledger.book import Ledger
from tests.e2e.prefect_processes import prefect_server, run_logs, wait_final, worker
from tests.helpers import PROJECT

pytestmark = [pytest.mark.server, pytest.mark.slow]

POOL = "sds-e2e"
ON_DEMAND = "sds-release/on-demand-tiny"
PREFECT = [sys.executable, "-m", "prefect"]


@dataclass(frozen=True)
class Deployed:
    """A home deployed with `sds deploy`, its server's environment and a decoy home/ledger."""

    home: Path
    env: dict[str, str]
    evil: Path
    workdir: Path


def _sds(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sds_release.flows.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def deployed(
    tmp_path_factory: pytest.TempPathFactory, tiny_csv: Path, tiny_config: Path
) -> Iterator[Deployed]:
    """A server, `sds deploy` of the tiny dataset (budget set first) run outside the checkout,
    and a worker of its pool started outside the checkout."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    root = tmp_path_factory.mktemp("deploy-e2e")
    (root / "prefect").mkdir()
    home, workdir = root / "home", root / "work"
    workdir.mkdir()
    home.mkdir()
    Ledger.open(home).set_budget("tiny", epsilon=100.0, delta=1e-3)
    with prefect_server(sys.executable, root / "prefect") as env:
        done = _sds(
            "deploy",
            "--home", str(home),
            "--input", str(tiny_csv),
            "--config", str(tiny_config),
            "--pool", POOL,
            env=env,
            cwd=workdir,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        start = f"PREFECT_API_URL={env['PREFECT_API_URL']} prefect worker start --pool {POOL}"
        assert f"start a worker: {start}" in done.stdout.splitlines()[-1]
        with (
            worker(PREFECT, POOL, env, workdir),
            temporary_settings({PREFECT_API_URL: env["PREFECT_API_URL"]}),
        ):
            yield Deployed(home, env, root / "evil", workdir)


@pytest.fixture
def client(deployed: Deployed) -> Iterator[Any]:
    """A synchronous Prefect client of the module's server."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as c:
        yield c


def _spent(home: Path, dataset: str = "tiny") -> float:
    status = Ledger.open(home).budget(dataset)
    return 0.0 if status is None else status.epsilon_spent + status.epsilon_reserved


def _decoys(evil: Path) -> dict[str, Any]:
    """A value for each pinned field; the paths point into ``evil``, which must stay empty."""
    values: dict[str, Any] = {field: "x" for field in PINNED}
    values |= {
        "home": str(evil / "home"),
        "ledger": f"sqlite:///{evil / 'ledger.sqlite'}",
        "input": str(evil / "data.csv"),
        "config": str(evil / "config.toml"),
        "dataset": "fresh",
        "default_budget": {"epsilon": 20.0},
        "seed": 1,
    }
    return values


def test_deploy_registers_module_path_deployments(deployed: Deployed, client: Any) -> None:
    """sds deploy made a locked pool and two module-path deployments with a closed schema, no
    pull step and no parameters; the scheduled one runs nightly at 02:00 UTC."""
    pool = client.read_work_pool(POOL)
    assert pool.base_job_template["variables"]["properties"] == {}
    assert pool.base_job_template["job_configuration"]["env"] == {"SDS_HOME": str(deployed.home)}
    for name in ("scheduled-tiny", "on-demand-tiny"):
        d = client.read_deployment_by_name(f"sds-release/{name}")
        assert d.entrypoint == "sds_release.flows.deployed.deployed_release" and not d.pull_steps
        assert d.work_pool_name == POOL and d.enforce_parameter_schema and d.parameters == {}
        schema = d.parameter_openapi_schema
        assert schema["additionalProperties"] is False and set(schema["properties"]) == {"options"}
        assert (deployed.home / "deployments" / f"{name}.toml").stat().st_mode & 0o777 == 0o600
    nightly = client.read_deployment_by_name("sds-release/scheduled-tiny").schedules[0].schedule
    assert (nightly.cron, nightly.timezone) == ("0 2 * * *", "UTC")


def test_each_pinned_field_is_refused_at_submission(deployed: Deployed, client: Any) -> None:
    """Every pinned field, as a run option or beside the options, is refused by the server
    with a message naming it; no run is created, nothing is written or charged."""
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.exceptions import PrefectHTTPStatusError

    dep = client.read_deployment_by_name(ON_DEMAND)
    only_this = DeploymentFilter(id=DeploymentFilterId(any_=[dep.id]))
    runs, spent = client.count_flow_runs(deployment_filter=only_this), _spent(deployed.home)
    for field, value in sorted(_decoys(deployed.evil).items()):
        for parameters in ({"options": {field: value}}, {"options": {}, field: value}):
            with pytest.raises(PrefectHTTPStatusError, match=rf"'{field}' was unexpected"):
                client.create_flow_run_from_deployment(dep.id, parameters=parameters)
    assert client.count_flow_runs(deployment_filter=only_this) == runs
    assert not deployed.evil.exists() and _spent(deployed.home) == spent


@pytest.mark.parametrize("key", ["command", "env", "env.SDS_HOME", "working_dir"])
def test_job_variables_are_refused(deployed: Deployed, client: Any, key: str) -> None:
    """A run's job variables (command, environment, working directory) are refused by the
    server against the locked pool, naming the variable; so is every run of a deployment
    given them; nothing runs."""
    from prefect.client.schemas.actions import DeploymentUpdate
    from prefect.exceptions import PrefectHTTPStatusError

    evil = str(deployed.evil)
    value = {
        "command": f"mkdir -p {evil}",
        "env": {"SDS_HOME": evil},
        "env.SDS_HOME": evil,
        "working_dir": evil,
    }[key]
    given = {key: value}
    dep = client.read_deployment_by_name(ON_DEMAND)
    with pytest.raises(PrefectHTTPStatusError, match=rf"'{key}' was unexpected"):
        client.create_flow_run_from_deployment(dep.id, job_variables=given)
    # Prefect 3.9.1 stores a deployment's job variables on a PATCH without checking them (API
    # write access is a custodian's: docs/hardening.md); every run of it is refused from then on
    client.update_deployment(dep.id, DeploymentUpdate(job_variables=given))
    try:
        with pytest.raises(PrefectHTTPStatusError, match=rf"'{key}' was unexpected"):
            client.create_flow_run_from_deployment(dep.id)
    finally:
        client.update_deployment(dep.id, DeploymentUpdate(job_variables={}))
    assert client.read_deployment(dep.id).job_variables == {}
    assert not deployed.evil.exists()


def _injected_run(client: Any, parameters: dict[str, Any]) -> Any:
    """A run whose parameters were changed after creation (PATCH /flow_runs: the server does
    not check them against the deployment's schema), then started: it must refuse itself."""
    from datetime import UTC, datetime, timedelta

    from prefect.states import Scheduled

    dep = client.read_deployment_by_name(ON_DEMAND)
    later = Scheduled(scheduled_time=datetime.now(UTC) + timedelta(hours=1))
    run = client.create_flow_run_from_deployment(dep.id, state=later)
    client.update_flow_run(run.id, parameters=parameters)
    assert client.read_flow_run(run.id).parameters == parameters
    client.set_flow_run_state(run.id, Scheduled(), force=True)
    return wait_final(client, run.id)


def test_injected_pinned_options_are_refused_in_the_run(deployed: Deployed, client: Any) -> None:
    """Pinned fields slipped into a run's options after the server's check are refused by the
    flow's parameter validation, naming them, logged in the run; nothing read or charged."""
    decoys = _decoys(deployed.evil)
    spent = _spent(deployed.home)
    fields = ("dataset", "home", "input", "ledger")
    run = _injected_run(client, {"options": {f: decoys[f] for f in fields}})
    assert run.state.is_failed(), run.state
    expected = "'dataset', 'home', 'input', 'ledger' are pinned by the deployment"
    assert expected in run.state.message
    assert expected in run_logs(client, run.id, expected)
    assert not deployed.evil.exists() and _spent(deployed.home) == spent


def test_an_injected_top_level_parameter_is_refused_in_the_run(
    deployed: Deployed, client: Any
) -> None:
    """A parameter beside the options, slipped in the same way, stops the run before the flow
    starts (Prefect: the flow has no such parameter), named in the run's logs."""
    spent = _spent(deployed.home)
    run = _injected_run(client, {"options": {}, "ledger": _decoys(deployed.evil)["ledger"]})
    assert run.state.is_crashed() or run.state.is_failed(), run.state
    logged = "provided with parameters ['options', 'ledger']"
    assert logged in run_logs(client, run.id, logged)
    assert not deployed.evil.exists() and _spent(deployed.home) == spent


def _releases(home: Path) -> set[Path]:
    return set(home.glob("releases/*/*"))


def test_too_many_synthetic_records_are_refused_at_submission(
    deployed: Deployed, client: Any
) -> None:
    """10^15 synthetic records (and a resolution of 10^15) are refused by the server against
    the deployment's schema (each run option has a maximum); no run is created, nothing is
    charged. (The run asks to start in an hour: on a server without the caps it would wait.)"""
    from datetime import UTC, datetime, timedelta

    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId
    from prefect.exceptions import PrefectHTTPStatusError
    from prefect.states import Scheduled

    dep = client.read_deployment_by_name(ON_DEMAND)
    only_this = DeploymentFilter(id=DeploymentFilterId(any_=[dep.id]))
    runs, spent = client.count_flow_runs(deployment_filter=only_this), _spent(deployed.home)
    later = Scheduled(scheduled_time=datetime.now(UTC) + timedelta(hours=1))
    for option, largest in (("synthetic_records", 100_000_000), ("resolution", 10_000)):
        with pytest.raises(PrefectHTTPStatusError, match=rf"greater than the maximum of {largest}"):
            client.create_flow_run_from_deployment(
                dep.id, parameters={"options": {option: 10**15}}, state=later
            )
    assert client.count_flow_runs(deployment_filter=only_this) == runs
    assert _spent(deployed.home) == spent


def test_too_many_synthetic_records_slipped_into_a_run_are_refused_by_the_flow(
    deployed: Deployed, client: Any
) -> None:
    """10^15 synthetic records written into a run after the server's check fail the run at the
    flow's parameter validation, naming the cap; nothing is read, written or charged."""
    spent, before = _spent(deployed.home), _releases(deployed.home)
    run = _injected_run(client, {"options": {"synthetic_records": 10**15}})
    assert run.state.is_failed(), run.state
    logged = "less than or equal to 100000000"
    assert logged in run_logs(client, run.id, logged)
    assert _spent(deployed.home) == spent and _releases(deployed.home) == before


def test_more_records_than_the_schema_allows_are_refused_before_any_charge(
    deployed: Deployed, client: Any
) -> None:
    """Below the absolute cap but above 10 x the pinned schema's max_rows (100,000), a run's
    synthetic_records passes the server and is refused by the flow before anything is read or
    charged, saying so in the run's state and logs."""
    dep = client.read_deployment_by_name(ON_DEMAND)
    spent, before = _spent(deployed.home), _releases(deployed.home)
    options = {"synthetic_records": 1_000_001}
    run = client.create_flow_run_from_deployment(dep.id, parameters={"options": options})
    run = wait_final(client, run.id)
    assert run.state.is_failed(), run.state
    said = "synthetic_records = 1,000,001 is more than 10 times the schema's max_rows (100,000)"
    assert said in run.state.message
    logged = "refused before anything was read or charged"
    assert logged in run_logs(client, run.id, logged)
    assert _spent(deployed.home) == spent and _releases(deployed.home) == before


def test_an_allowed_run_completes_charged_once(deployed: Deployed, client: Any) -> None:
    """A run choosing ε = 2 and R = 2 completes: one release of the pinned input in the pinned
    home, ε = 2 charged once, its parameters are the options only."""
    dep = client.read_deployment_by_name(ON_DEMAND)
    before = _spent(deployed.home)
    done_before = set(deployed.home.glob("releases/tiny/*/manifest.json"))
    options = {"epsilon": 2.0, "reporting_length": 2}
    run = client.create_flow_run_from_deployment(dep.id, parameters={"options": options})
    run = wait_final(client, run.id)
    assert run.state.is_completed(), (run.state, run_logs(client, run.id)[-3000:])
    assert run.parameters == {"options": options}
    new = set(deployed.home.glob("releases/tiny/*/manifest.json")) - done_before
    assert len(new) == 1
    assert _spent(deployed.home) == pytest.approx(before + 2.0)
    release_id = new.pop().parent.name
    assert Ledger.open(deployed.home).reservation(release_id).status == "completed"
    logged = "this run chose {'epsilon': 2.0, 'reporting_length': 2}"
    assert logged in run_logs(client, run.id, logged)
    [start] = [e for e in read_journal(deployed.home) if e.release_id == release_id]
    assert (start.event, start.origin.kind, start.origin.deployment) == (
        "start",
        "on-demand",
        "on-demand-tiny",
    )  # the audit page's "who started it": a run of the deployment, not a schedule
    assert start.origin.flow_run_id == str(run.id)


def _extra_deployment(name: str) -> None:
    """One more on-demand deployment of the flow on the module's pool (its pin file is the
    test's business)."""
    from prefect.types.entrypoint import EntrypointType

    from sds_release.flows.deployed import deployed_release

    deployed_release.to_deployment(
        name, work_pool_name=POOL, entrypoint_type=EntrypointType.MODULE_PATH
    ).apply()


def test_a_run_never_creates_a_budget(
    deployed: Deployed, client: Any, tiny_csv: Path, tiny_config: Path
) -> None:
    """A deployment pinned to a dataset without a budget: the run is refused before anything is
    read, saying budgets come from `sds budget set`, although the config has a [budget]."""
    _extra_deployment("no-budget")
    values = {"input": str(tiny_csv), "config": str(tiny_config), "dataset": "nobudget"}
    write_pins(pin_path(deployed.home, "no-budget"), values, "test")
    run = client.create_flow_run_from_deployment(
        client.read_deployment_by_name("sds-release/no-budget").id
    )
    run = wait_final(client, run.id)
    assert run.state.is_failed()
    assert "'nobudget' has no lifetime budget" in run.state.message
    logged = "refused before anything was read or charged"
    assert logged in run_logs(client, run.id, logged)
    refused = [e for e in read_journal(deployed.home) if e.dataset == "nobudget"]
    assert [(e.event, e.origin.deployment) for e in refused] == [("refused", "no-budget")]
    assert Ledger.open(deployed.home).budget("nobudget") is None
    assert not (deployed.home / "releases" / "nobudget").exists()


def test_a_run_over_the_per_release_policy_is_refused(
    deployed: Deployed, client: Any, tiny_csv: Path, tiny_config: Path
) -> None:
    """A run choosing more ε than the dataset's per-release policy allows is refused at the
    reservation, naming the policy and who set it; nothing is read or charged."""
    Ledger.open(deployed.home).set_budget(
        "capped", epsilon=50.0, delta=1e-3, max_epsilon_per_release=0.5, set_by="custodian"
    )
    _extra_deployment("capped")
    values = {"input": str(tiny_csv), "config": str(tiny_config), "dataset": "capped"}
    write_pins(pin_path(deployed.home, "capped"), values, "test")
    run = client.create_flow_run_from_deployment(
        client.read_deployment_by_name("sds-release/capped").id,
        parameters={"options": {"epsilon": 1.0}},
    )
    run = wait_final(client, run.id)
    assert run.state.is_failed()
    assert "at most 0.5" in run.state.message and "custodian" in run.state.message
    assert _spent(deployed.home, "capped") == 0.0
    [refused] = [e for e in read_journal(deployed.home) if e.dataset == "capped"]
    assert (refused.event, refused.epsilon) == ("refused", 1.0) and "at most 0.5" in (
        refused.reason or ""
    )
    assert not (deployed.home / "releases" / "capped").exists()


def test_a_pin_file_others_can_write_is_refused(
    deployed: Deployed, client: Any, tiny_csv: Path, tiny_config: Path
) -> None:
    """A pin file writable by its group is refused in the run with the chmod fix."""
    _extra_deployment("loose-pin")
    path = write_pins(
        pin_path(deployed.home, "loose-pin"),
        {"input": str(tiny_csv), "config": str(tiny_config)},
        "test",
    )
    path.chmod(0o660)
    spent = _spent(deployed.home)
    run = client.create_flow_run_from_deployment(
        client.read_deployment_by_name("sds-release/loose-pin").id
    )
    run = wait_final(client, run.id)
    assert run.state.is_failed() and f"chmod go-w {path}" in run.state.message
    assert _spent(deployed.home) == spent


def test_prefect_yaml_from_a_clone(
    deployed: Deployed,
    client: Any,
    tiny_csv: Path,
    tiny_config: Path,
    tmp_path: Path,
) -> None:
    """deployments/prefect.yaml from the checkout, on the pool and pins of `sds deploy
    --no-register`: a run with ε = 2 completes; a pinned run option is refused at submission."""
    from prefect.exceptions import PrefectHTTPStatusError

    home = tmp_path / "clone-home"
    home.mkdir()
    Ledger.open(home).set_budget("tiny", epsilon=50.0, delta=1e-3)
    args = ["--home", str(home), "--input", str(tiny_csv), "--config", str(tiny_config)]
    made = _sds("deploy", "--no-register", *args, env=deployed.env, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert sorted(p.name for p in (home / "deployments").iterdir()) == [
        "on-demand-release.toml",
        "scheduled-release.toml",
    ]
    env = {**deployed.env, "SDS_PROJECT_DIR": str(PROJECT)}
    done = subprocess.run(
        [*PREFECT, "--no-prompt", "deploy", "--all", "--prefect-file", "deployments/prefect.yaml"],
        env=env,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    dep = client.read_deployment_by_name("sds-release/on-demand-release")
    assert (
        dep.entrypoint == "sds_release/flows/deployed.py:deployed_release" and dep.parameters == {}
    )
    with pytest.raises(PrefectHTTPStatusError, match="'input' was unexpected"):
        client.create_flow_run_from_deployment(
            dep.id, parameters={"options": {"input": str(tiny_csv)}}
        )
    with worker(PREFECT, "sds-local", env, tmp_path):
        run = client.create_flow_run_from_deployment(
            dep.id, parameters={"options": {"epsilon": 2.0}}
        )
        run = wait_final(client, run.id)
    assert run.state.is_completed(), (run.state, run_logs(client, run.id)[-3000:])
    assert len(list(home.glob("releases/tiny/*/manifest.json"))) == 1
    assert _spent(home) == pytest.approx(2.0)
