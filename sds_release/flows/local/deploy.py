"""Deploying releases from the installed package: a locked process work pool, the pin files,
and the scheduled and on-demand deployments of :func:`sds_release.flows.deployed.deployed_release`.

``sds deploy`` calls :func:`deploy`. The pool's base job template has no variables: the command
(this interpreter's ``python -m prefect.engine``), the environment (``SDS_HOME``) and the
working directory (a fresh temporary one) are literals, so the server refuses any job variable
a run or a deployment sends. The deployments use module-path entrypoints (no checkout, no pull
step) and a parameter schema that refuses every key but ``options``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sds_core.errors import SdsInputError
from sds_release.flows.local.server import AUTH_ENV

__all__ = [
    "LOCKED_VARIABLES",
    "YAML_DEPLOYMENTS",
    "DeployResult",
    "DeploySettings",
    "deploy",
    "deployment_names",
    "locked_template",
    "pin_settings",
]

YAML_DEPLOYMENTS = ("scheduled-release", "on-demand-release")
"""The deployments of ``deployments/prefect.yaml`` whose pin files ``--no-register`` writes
(its ``dask-release`` takes a copy of the on-demand one with the executor added)."""


def deployment_names(dataset: str) -> tuple[str, str]:
    """The scheduled and on-demand deployments of a dataset: a home (one work pool) can
    deploy several datasets, each with its own pin files."""
    return f"scheduled-{dataset}", f"on-demand-{dataset}"


LOCKED_VARIABLES: dict[str, Any] = {
    "type": "object",
    "properties": {},
    "additionalProperties": False,
}
"""The locked pool's variables schema: none, and no others (the server refuses every job
variable of a run or a deployment against it)."""


@dataclass(frozen=True, slots=True)
class DeploySettings:
    """What ``sds deploy`` was given (paths as typed; resolved by :func:`pin_settings`)."""

    home: Path
    input: str | None = None
    config: str | None = None
    cron: str = "0 2 * * *"
    timezone: str = "UTC"
    pool: str = "sds-local"
    register: bool = True
    series: bool = False  # each run rebuilds the dataset's series (pin file: series = true)


@dataclass(frozen=True, slots=True)
class DeployResult:
    """What :func:`deploy` did, for the command to print."""

    api_url: str
    pool: str
    pool_action: str  # "created", "updated" or "unchanged"
    pins: tuple[Path, ...]
    deployments: tuple[str, ...]
    dataset: str
    auth_file: Path | None = None  # the home's server: its credential, which a worker needs

    def worker_command(self) -> str:
        """The one line that starts a worker for the pool (the credential read from its file,
        never printed)."""
        auth = "" if self.auth_file is None else f'{AUTH_ENV}="$(cat {self.auth_file})" '
        return f"PREFECT_API_URL={self.api_url} {auth}prefect worker start --pool {self.pool}"


def locked_template(home: Path, python: str | None = None) -> dict[str, Any]:
    """The locked base job template of a process pool serving ``home``."""
    from prefect.utilities.processutils import command_to_string

    return {
        "job_configuration": {
            "command": command_to_string([python or sys.executable, "-m", "prefect.engine"]),
            "env": {"SDS_HOME": str(home)},
            "labels": {},
            "name": None,
            "stream_output": True,
            "working_dir": None,  # a new temporary directory per run
        },
        "variables": LOCKED_VARIABLES,
    }


def pin_settings(settings: DeploySettings) -> dict[str, Any]:
    """The pin file's values: absolute ``input`` and ``config`` and the ledger (without a
    password), from the options, else the config file, else ``$SDS_LEDGER_URL``; ``series =
    true`` when each run rebuilds the dataset's series.

    Raises:
        SdsInputError: no input, a missing file, or a ledger URL with a password.
    """
    from sds_release.store.config.loading import load_config
    from sds_release.store.ledger.backends import LEDGER_URL_ENV, split_password

    cfg = load_config(settings.config) if settings.config else {}
    given = settings.input or cfg.get("input")
    if not given:
        raise SdsInputError(
            'no input to deploy: give --input PATH (or input = "PATH" in the --config file)'
        )
    source = str(given)
    if "://" not in source and not any(c in source for c in "*?["):
        path = Path(source).expanduser().absolute()
        if not path.exists():
            raise SdsInputError(f"input {source!r} does not exist; check --input")
        source = str(path)
    ledger = cfg.get("ledger") or os.environ.get(LEDGER_URL_ENV) or None
    if ledger is not None and split_password(ledger)[1] is not None:
        raise SdsInputError(
            "the ledger URL carries a password, which a pin file must not hold; keep it in "
            "PGPASSWORD or ~/.pgpass of the worker's user"
        )
    values: dict[str, Any] = {"input": source, "ledger": ledger}
    if settings.series:
        values["series"] = True
    if settings.config:
        values["config"] = str(Path(settings.config).expanduser().absolute())
    return values


def _schedule(cron: str, timezone: str) -> Any:
    """The nightly schedule, checked here so a typo is one clear message."""
    from prefect.client.schemas.schedules import CronSchedule
    from prefect.schedules import Cron
    from pydantic import ValidationError

    try:
        CronSchedule(cron=cron, timezone=timezone)
    except ValidationError as e:
        reason = "; ".join(err["msg"].removeprefix("Value error, ") for err in e.errors())
        raise SdsInputError(
            f"--cron {cron!r} --timezone {timezone!r} is not a valid schedule ({reason}); "
            'give five cron fields such as "0 2 * * *" and an IANA zone such as UTC'
        ) from None
    return Cron(cron, timezone=timezone)


def _api_server(home: Path) -> tuple[str, Path | None]:
    """The Prefect server the deployments go to: ``PREFECT_API_URL``, else the home's running
    server (``sds server start``), whose client environment (URL, credential) is set here;
    returns the URL and, for the home's server, its credential file.

    Raises:
        SdsInputError: neither.
    """
    from sds_release.flows.local import server as local_server

    url = os.environ.get("PREFECT_API_URL")
    if url:
        return url, None
    info = local_server.status(home)
    if info is None:
        raise SdsInputError(
            "no Prefect server to deploy to: set PREFECT_API_URL to your server's API, or "
            f"start the home's with `sds server start --home {home}` (it keeps running, as a "
            "schedule needs)"
        )
    env = local_server.client_env(home, info)
    os.environ.update(env)
    return info.api_url, home / local_server.AUTH_FILE if AUTH_ENV in env else None


def _ensure_pool(client: Any, name: str, home: Path) -> str:
    """Create the locked pool, or refresh one that is already locked for this home.

    Raises:
        SdsInputError: a pool of that name that is not a locked process pool of this home.
    """
    from prefect.client.schemas.actions import WorkPoolCreate, WorkPoolUpdate
    from prefect.exceptions import ObjectNotFound

    template = locked_template(home)
    try:
        pool = client.read_work_pool(name)
    except ObjectNotFound:
        client.create_work_pool(
            WorkPoolCreate(name=name, type="process", base_job_template=template)
        )
        return "created"
    current = pool.base_job_template or {}
    env = (current.get("job_configuration") or {}).get("env")
    locked = pool.type == "process" and current.get("variables") == LOCKED_VARIABLES
    if not locked:
        raise SdsInputError(
            f"work pool {name!r} exists and lets a run change what the worker executes (its "
            "base job template has job variables); choose another --pool, or delete it "
            f"(`prefect work-pool delete {name}`) and run sds deploy again"
        )
    if not isinstance(env, dict) or env.get("SDS_HOME") != str(home):
        other = env.get("SDS_HOME") if isinstance(env, dict) else None
        raise SdsInputError(
            f"work pool {name!r} serves the home {other}, not {home}; one pool serves one "
            "home: give this home its own --pool NAME"
        )
    if current == template:
        return "unchanged"
    client.update_work_pool(name, WorkPoolUpdate(base_job_template=template))
    return "updated"  # e.g. the package was installed in another virtual environment


def _check_names(client: Any, names: tuple[str, ...], pool: str) -> None:
    """Refuse to take over a deployment of the same name that another pool (home) serves."""
    from prefect.exceptions import ObjectNotFound

    from sds_release.flows.deployed import deployed_release

    for name in names:
        full = f"{deployed_release.name}/{name}"
        try:
            existing = client.read_deployment_by_name(full)
        except ObjectNotFound:
            continue
        if existing.work_pool_name != pool:
            raise SdsInputError(
                f"deployment {full} already exists for work pool {existing.work_pool_name!r} "
                f"(another home), not {pool!r}; deploy this dataset from that home, or delete "
                f"the deployment first (`prefect deployment delete {full}`)"
            )


def _register(names: tuple[str, str], pool: str, schedule: Any) -> tuple[str, ...]:
    """The scheduled and on-demand deployments ``names``, from the installed package;
    returns their full names."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import DeploymentUpdate
    from prefect.types.entrypoint import EntrypointType

    from sds_release.flows.deployed import deployed_release

    common: dict[str, Any] = {
        "work_pool_name": pool,
        "entrypoint_type": EntrypointType.MODULE_PATH,
        "enforce_parameter_schema": True,
    }
    scheduled, on_demand = names
    made: dict[str, Any] = {
        scheduled: deployed_release.to_deployment(
            scheduled,
            schedules=[schedule],
            description="Scheduled DP release with the settings pinned by `sds deploy`.",
            tags=["dp-release", "scheduled"],
            **common,
        ),
        on_demand: deployed_release.to_deployment(
            on_demand,
            description="DP release on demand (Run > Custom run): ε, δ and the synthesis "
            "options; input, dataset and ledger are pinned by `sds deploy`.",
            tags=["dp-release", "on-demand"],
            **common,
        ),
    }
    registered = []
    with get_client(sync_client=True) as client:
        for name in names:
            deployment_id = made[name].apply()
            # a run's parameters may hold ``options`` and nothing else: the flow's schema lists
            # it, and this closes the top level as RunOptions closes its own fields
            schema = client.read_deployment(deployment_id).parameter_openapi_schema or {}
            client.update_deployment(
                deployment_id,
                DeploymentUpdate(
                    parameter_openapi_schema={**schema, "additionalProperties": False}
                ),
            )
            registered.append(f"{deployed_release.name}/{name}")
    return tuple(registered)


def deploy(settings: DeploySettings) -> DeployResult:
    """Create the locked pool, write the pin files and register the deployments.

    Everything is checked before the server is changed: the pinned settings build a valid
    release (with the default options), and the dataset has a lifetime budget.

    Raises:
        SdsInputError: a bad option, a dataset without a budget, no server, a pool in the way.
    """
    from sds_release.flows.local.launch import prefect_environment
    from sds_release.store.config.deployment import (
        Pins,
        RunOptions,
        deployed_params,
        pin_path,
        require_budget,
        write_pins,
    )
    from sds_release.store.workspace.home import resolve_home

    home = resolve_home(settings.home)
    values = pin_settings(settings)
    built = deployed_params(home, Pins(home / "sds-deploy", values), RunOptions())
    require_budget(built.params)
    dataset = built.params.dataset or ""
    names = deployment_names(dataset) if settings.register else YAML_DEPLOYMENTS
    for name in names:
        pin_path(home, name)  # a valid file name
    api_url, auth_file = _api_server(home)
    prefect_environment(home)  # before Prefect is imported
    schedule = _schedule(settings.cron, settings.timezone)

    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        if settings.register:
            _check_names(client, names, settings.pool)
        pool_action = _ensure_pool(client, settings.pool, home)
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    pins = tuple(
        write_pins(
            pin_path(home, name),
            values,
            f"The pinned settings of the deployment {name} (work pool {settings.pool}),\n"
            f"written by `sds deploy` at {stamp}. A run of the deployment cannot change them;\n"
            "edit this file (keep it 0600) or run sds deploy again to change them.",
        )
        for name in names
    )
    deployments = _register(names, settings.pool, schedule) if settings.register else ()
    return DeployResult(api_url, settings.pool, pool_action, pins, deployments, dataset, auth_file)
