"""``sds server start|stop|status``: the home's Prefect server (and UI) that releases reuse."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from sds_release.flows.cli.common import HomeOpt, SdsTyper, fail, home_dir

__all__ = ["server_app"]

server_app = SdsTyper(help="The local Prefect server (and UI) releases of a home reuse.")


@server_app.command("start")
def server_start(
    home: HomeOpt = None,
    port: Annotated[int | None, typer.Option(help="Port (default 4200 when free).")] = None,
    idle_timeout: Annotated[
        float | None, typer.Option(help="Stop after this many minutes without a release.")
    ] = None,
) -> None:
    """Start the home's Prefect server in the background (database in $SDS_HOME/prefect)."""
    from sds_release.flows.local import server as local_server

    root = home_dir(home)
    info = local_server.status(root)
    if info is None:
        info = local_server.start(
            root, port=port, idle_timeout_s=None if idle_timeout is None else idle_timeout * 60
        )
    try:
        info = local_server.wait_healthy(info)
    except RuntimeError as e:
        raise fail(str(e), 1) from None
    typer.echo(info.describe())
    _client_lines(root, info)
    typer.echo(_runner_line(root, local_server.wait_runner(info)))


def _client_lines(root: Path, info: Any) -> None:
    """The environment a client of the home's server needs, one ``KEY=VALUE`` line each (a
    shell can ``export`` them), and where the credential lives."""
    from sds_release.flows.local.server import AUTH_ENV, AUTH_FILE, client_env

    env = client_env(root, info)
    for key, value in env.items():
        typer.echo(f"{key}={value}")
    if AUTH_ENV in env:
        typer.echo(
            f"# the server requires basic authentication: {AUTH_ENV} above, from "
            f"{root / AUTH_FILE} (mode 0600); the UI asks for it once"
        )
    else:
        typer.echo(
            f"# the server requires basic authentication, and this user cannot read its "
            f"credential ({root / AUTH_FILE}): ask the home's owner"
        )


def _runner_line(root: Path, answer: dict[str, Any] | None) -> str:
    """How releases of the home run: through the warm runner or in-process."""
    from sds_release.flows.local.handoff import (
        RUNNER_ENV,
        legacy_ping,
        runner_available,
        runner_enabled,
    )

    if answer is not None:
        return f"release runner: ready (pid {answer['pid']}); releases start warm"
    if not runner_available():
        return "release runner: not available on this platform; releases run in-process"
    if not runner_enabled():
        return f"release runner: off ({RUNNER_ENV}=off); releases run in-process"
    if legacy_ping(root) is not None:
        return (
            "release runner: this server was started by an earlier version, whose runner this "
            "version does not use; releases run in-process until `sds server stop` and "
            "`sds server start`"
        )
    return "release runner: not running; releases run in-process"


@server_app.command("stop")
def server_stop(home: HomeOpt = None) -> None:
    """Stop the home's Prefect server (its runs and artifacts stay in the database)."""
    from sds_release.flows.local import server as local_server

    root = home_dir(home)
    info = local_server.stop(root)
    typer.echo(f"stopped the Prefect server of {root}" if info else f"no server running for {root}")


@server_app.command("status")
def server_status(home: HomeOpt = None) -> None:
    """Show the home's Prefect server (exit status 1 when none is running)."""
    from sds_release.flows.local import server as local_server
    from sds_release.flows.local.handoff import ping

    root = home_dir(home)
    info = local_server.status(root)
    if info is None:
        typer.echo(f"no server running for {root}; start one with `sds server start`")
        raise typer.Exit(1)
    state = "answering" if info.healthy else "starting"
    typer.echo(f"{state}: {info.describe()}")
    _client_lines(root, info)
    typer.echo(_runner_line(root, ping(root)))
