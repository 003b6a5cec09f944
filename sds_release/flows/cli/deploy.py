"""``sds deploy``: the scheduled and on-demand deployments of a home, from the installed package.

The work is :func:`sds_release.flows.local.deploy.deploy`: a locked process work pool, the pin files
in ``$SDS_HOME/deployments/`` and the two deployments; this prints what it did and the one line
that starts a worker.
"""

from __future__ import annotations

from typing import Annotated

import typer

from sds_release.flows.cli.common import HomeOpt, home_dir

__all__ = ["deploy_command"]


def deploy_command(
    input: Annotated[
        str | None,
        typer.Option(
            "--input",
            metavar="PATH",
            help="The sensitive table every run releases (default: input in the config).",
        ),
    ] = None,
    config: Annotated[
        str | None,
        typer.Option(
            "--config",
            metavar="FILE",
            help="The release config (schema, dataset, ε...); its budget section is not used: "
            "set budgets with `sds budget set`.",
        ),
    ] = None,
    home: HomeOpt = None,
    cron: Annotated[
        str, typer.Option(help="When the scheduled deployment runs (cron, five fields).")
    ] = "0 2 * * *",
    timezone: Annotated[str, typer.Option(help="The cron's time zone (IANA name).")] = "UTC",
    pool: Annotated[
        str, typer.Option(help="The process work pool (created locked if missing).")
    ] = "sds-local",
    register: Annotated[
        bool,
        typer.Option(
            "--register/--no-register",
            help="--no-register: create the pool and write the pin files only (a clone "
            "deploys deployments/prefect.yaml itself).",
        ),
    ] = True,
    series: Annotated[
        bool,
        typer.Option(
            "--series",
            help="After each release, rebuild the dataset's series up to the period released "
            "(as `sds series DATASET --until PERIOD`; pin file: series = true).",
        ),
    ] = False,
) -> None:
    """Register the nightly and on-demand releases of a home on the Prefect server.

    A run of them chooses ε, δ and the synthesis options only; the input, config, dataset
    and ledger are pinned in HOME/deployments/. The dataset needs a budget (sds budget set).
    """
    from sds_release.flows.local.deploy import DeploySettings, deploy

    done = deploy(
        DeploySettings(
            home=home_dir(home),
            input=input,
            config=config,
            cron=cron,
            timezone=timezone,
            pool=pool,
            register=register,
            series=series,
        )
    )
    typer.echo(
        f"work pool {done.pool}: {done.pool_action} (process; a run cannot change its command, "
        "environment or working directory)"
    )
    for path in done.pins:
        typer.echo(f"pinned settings: {path}")
    for name in done.deployments:
        typer.echo(f"deployment {name} of dataset {done.dataset} on {done.api_url}")
    if not done.deployments:
        typer.echo("no deployment registered (--no-register): deploy deployments/prefect.yaml")
    typer.echo(f"start a worker: {done.worker_command()}")
