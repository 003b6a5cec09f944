"""The ``sds`` command line (typer + rich), one module per command group.

- ``release``: ``release``, ``resume``, ``cancel`` (the options are ReleaseParams' fields);
- ``budget``: ``budget set|show``;
- ``server``: ``server start|stop|status``;
- ``audit``: ``audit`` (``--verify``, ``--replay``), ``verify``, ``sign``, ``signing-key``;
- ``ledger``: ``ledger migrate``;
- ``report``: ``report``;
- ``evaluate``: ``evaluate`` (outside a release, not DP);
- ``deploy``: ``deploy`` (the scheduled and on-demand deployments of a home);
- ``common``: the shared options, the error handling (:class:`~flows.cli.common.SdsTyper`)
  and the output.

The commands do no release work themselves: a release runs through
:mod:`flows.local.launch`, everything else is a call into ``release_store``. Prefect, GX and
pandas are imported inside the commands that need them, so ``sds --help`` stays fast. Errors
become one paragraph on stderr and a non-zero exit; on success the last line printed by
``release`` and ``resume`` is the release directory.
"""

from __future__ import annotations

from flows.cli import audit, budget, deploy, evaluate, ledger, release, report, server
from flows.cli.common import SdsTyper
from flows.console import quick_exit

__all__ = ["app", "main"]

app = SdsTyper(
    name="sds",
    help="Differentially private data releases (SDS marginals + synthetic data) with a "
    "privacy-budget ledger.",
)
release.register(app)
app.add_typer(budget.budget_app, name="budget")
audit.register(app)
app.add_typer(server.server_app, name="server")
app.command("report")(report.report_command)
app.add_typer(ledger.ledger_app, name="ledger")
app.command()(evaluate.evaluate)
app.command("deploy")(deploy.deploy_command)


def main() -> None:  # pragma: no cover - the console entry point
    """Entry point of ``sds`` and ``python -m flows.cli``: the app, then :func:`quick_exit`."""
    try:
        app()
        code: int | str | None = 0
    except SystemExit as e:  # typer/click end every command this way
        code = e.code
    quick_exit(code)
