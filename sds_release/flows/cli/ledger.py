"""``sds ledger migrate``: the privacy-budget ledger itself, copied to another URL."""

from __future__ import annotations

from typing import Annotated

import typer

from sds_release.flows.cli.common import HomeOpt, JsonOpt, SdsTyper, echo_json, fail, home_dir

__all__ = ["ledger_app"]

ledger_app = SdsTyper(help="The privacy-budget ledger itself.")


@ledger_app.command("migrate")
def ledger_migrate(
    to: Annotated[str, typer.Option("--to", help="Target ledger URL (e.g. postgresql://...).")],
    source: Annotated[
        str | None,
        typer.Option("--from", help="Source ledger URL (default: HOME/ledger.sqlite)."),
    ] = None,
    home: HomeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Copy the ledger to another URL row by row, verify it, and make the old one read-only."""
    from sds_release.store.audit.home import audit_home as run_audit
    from sds_release.store.ledger.backends import default_ledger_url
    from sds_release.store.ledger.book import Ledger
    from sds_release.store.ledger.migration import migrate_ledger

    root = home_dir(home)
    try:
        report = migrate_ledger(
            Ledger.from_url(source or default_ledger_url(root)), Ledger.from_url(to)
        )
        audited = run_audit(root, verify=True, ledger_url=to)
    except RuntimeError as e:  # a caller's mistake (SdsInputError) is the CLI's handler's
        raise fail(str(e), 2) from None
    if as_json:
        out = report.to_dict() | {"audit_ok": audited.ok, "audit_problems": audited.problems}
        echo_json(out)
    else:
        typer.echo(
            f"copied {report.copied} of {report.rows} rows from {report.source} to "
            f"{report.target} (head seq {report.head_seq}, {report.head_hash[:12]}…); the old "
            "ledger is now read-only"
        )
        for p in audited.problems:
            typer.echo(f"problem: {p}", err=True)
        typer.echo(
            "audit --verify: " + ("ok" if audited.ok else f"{len(audited.problems)} problem(s)")
        )
    if not audited.ok:
        raise typer.Exit(1)
