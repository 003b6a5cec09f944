"""The ``sds`` command line (typer + rich), one module per command group.

- ``release``: ``release``, ``resume``, ``cancel`` (the options are ReleaseParams' fields);
- ``plan``: ``plan`` (the preview: a release's noise and cost before anything is spent);
- ``budget``: ``budget set|show``;
- ``server``: ``server start|stop|status``;
- ``audit``: ``audit`` (``--verify``, ``--replay``), ``verify``, ``sign``, ``signing-key``;
- ``ledger``: ``ledger migrate``;
- ``report``: ``report``;
- ``series``: ``series`` (a dataset's DP counts across its periods, signed);
- ``evaluate``: ``evaluate`` (outside a release, not DP; ``--privacy-risk``) and ``split``
  (control rows held back before a release);
- ``deploy``: ``deploy`` (the scheduled and on-demand deployments of a home);
- ``publish``: ``publish`` (a complete release copied to a bucket);
- ``common``: the shared options, the error handling
(:class:`~sds_release.flows.cli.common.SdsTyper`)
  and the output.

The commands do no release work themselves: a release runs through
:mod:`sds_release.flows.local.launch`, everything else is a call into ``sds_release.store``.
Prefect, GX and pandas are imported inside the commands that need them, so ``sds --help`` stays
fast. Errors become one paragraph on stderr and a non-zero exit; on success the last line printed by
``release`` and ``resume`` is the release directory.
"""

from __future__ import annotations

from typing import Annotated

import typer

from sds_release.flows.cli import (
    audit,
    budget,
    deploy,
    evaluate,
    ledger,
    plan,
    publish,
    release,
    report,
    series,
    server,
)
from sds_release.flows.cli.common import SdsTyper
from sds_release.flows.console import quick_exit

__all__ = ["app", "main"]

app = SdsTyper(
    name="sds",
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, PowerShell)
    help="Differentially private data releases (SDS marginals + synthetic data) with a "
    "privacy-budget ledger.",
)


def _version(value: bool) -> None:
    """``--version``: the installed package's version (package metadata: nothing imported)."""
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"sds-release {version('sds-release')}")
        except PackageNotFoundError:  # run from a checkout that was never installed
            typer.echo("sds-release (not installed: run `pip install -e .`)")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Differentially private data releases (SDS marginals + synthetic data) with a
    privacy-budget ledger."""


release.register(app)
app.command()(plan.plan)
app.add_typer(budget.budget_app, name="budget")
audit.register(app)
app.add_typer(server.server_app, name="server")
app.command("report")(report.report_command)
app.command("series")(series.series_command)
app.add_typer(ledger.ledger_app, name="ledger")
app.command()(evaluate.evaluate)
app.command()(evaluate.split)
app.command("deploy")(deploy.deploy_command)
app.command("publish")(publish.publish_command)


def main() -> None:  # pragma: no cover - the console entry point
    """Entry point of ``sds`` and ``python -m sds_release.flows.cli``: the app, then
    :func:`quick_exit`."""
    from sds_release.store.run.timing import mark

    mark("client:main")  # bench/bench_release.py: Python's start and the CLI's imports end here
    try:
        app(prog_name="sds")  # also under `python -m sds_release.flows.cli`: completion keys on it
        code: int | str | None = 0
    except SystemExit as e:  # typer/click end every command this way
        code = e.code
    quick_exit(code)
