"""``sds audit`` (with ``--verify``, ``--replay`` or ``--report``), ``sds verify``, ``sds sign``
and ``sds signing-key show|rotate``: checking releases after the fact, and their signatures."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from sds_release.flows.cli.common import (
    HomeOpt,
    JsonOpt,
    LedgerOpt,
    SdsTyper,
    echo_json,
    fail,
    home_dir,
    print_table,
    published_release,
    stdout_console,
)

__all__ = ["key_app", "register"]

key_app = SdsTyper(help="The home's Ed25519 release-signing key.")


def audit(
    dataset: Annotated[
        str | None, typer.Argument(help="Only this dataset; with --replay, the RELEASE_ID.")
    ] = None,
    verify: Annotated[bool, typer.Option("--verify", help="Check hashes and chain.")] = False,
    replay: Annotated[
        bool,
        typer.Option(
            "--replay",
            help="Recompute RELEASE_ID from --input, its recorded parameters and its key "
            "(nothing is charged) and compare every published file byte for byte.",
        ),
    ] = False,
    input: Annotated[
        str | None,
        typer.Option(
            "--input",
            help="With --replay: the input the release was made from (a file, or the "
            "postgresql:// URL: the table or query is the recorded one).",
        ),
    ] = None,
    as_report: Annotated[
        bool,
        typer.Option(
            "--report",
            help="Write one private HTML page of every release of the home (or DATASET): who "
            "started it, its state, spend, budget before and after, and its checks now.",
        ),
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            metavar="FILE",
            help="With --report: where to write the page (default "
            "HOME/private/_audit/audit-report.html).",
        ),
    ] = None,
    as_json: JsonOpt = False,
    home: HomeOpt = None,
    ledger: LedgerOpt = None,
) -> None:
    """List releases and budgets; --verify checks the ledger chain and every artifact hash.

    `sds audit RELEASE_ID --replay --input PATH` recomputes that release and compares it with
    what was published; it exits 1 when anything differs. `sds audit --report [DATASET]`
    writes the audit page and prints its path last.
    """
    from rich.table import Table

    if (as_report or out is not None) and (replay or input is not None):
        raise fail("--report and --replay are separate audits; run one at a time", 2)
    if replay or input is not None:
        _replay(dataset, input, replay=replay, verify=verify, as_json=as_json, home=home)
        return
    from sds_release.store.audit.home import audit_home as run_audit
    from sds_release.store.workspace.home import validate_id

    if dataset is not None:
        validate_id(dataset, "dataset id")
    if as_report or out is not None:
        _report(
            dataset, out, report=as_report, verify=verify, as_json=as_json, home=home, ledger=ledger
        )
        return
    report = run_audit(home_dir(home), dataset, verify=verify, ledger_url=ledger)
    if as_json:
        echo_json(report.to_dict())
    else:
        rows = report.table_rows()
        table = Table(*(rows[0].keys() if rows else ["release"]))
        for row in rows:
            table.add_row(*row.values())
        console = stdout_console()
        print_table(console, table)
        for r in report.releases:
            if r.report:
                console.print(
                    f"report of {r.release_id}: {Path(r.report).as_uri()}", soft_wrap=True
                )
        for line in report.spend_lines():
            console.print(line, soft_wrap=True, markup=False)
        for p in report.problems:
            console.print(f"[red]problem:[/red] {p}")
        if verify and report.ok:
            console.print("[green]verified: ledger chain and all artifacts intact[/green]")
    if verify and not report.ok:
        raise typer.Exit(1)


def _report(
    dataset: str | None,
    out: Path | None,
    *,
    report: bool,
    verify: bool,
    as_json: bool,
    home: str | None,
    ledger: str | None,
) -> None:
    """``sds audit --report``: the audit page (it reads the ledger and the published files only,
    charges nothing); prints the number of problems found and the page's path last."""
    if not report:
        raise fail("--out names the page of --report: sds audit --report [DATASET] --out FILE", 2)
    if as_json:
        raise fail("--report writes a page; --json prints the audit: run one at a time", 2)
    from sds_release.store.audit.page import write_audit_page
    from sds_release.store.audit.trail import audit_trail

    trail = audit_trail(home_dir(home), dataset, ledger_url=ledger)
    path = write_audit_page(trail, out)
    bad = len(trail.problems) + (trail.ledger_ok is False)
    typer.echo(
        f"audit page: {len(trail.entries)} release(s) and refusal(s), "
        + (f"{bad} problem(s) found (listed on the page)" if bad else "every check passed")
    )
    typer.echo(path)
    if verify and bad:
        raise typer.Exit(1)


def _replay(
    release_id: str | None,
    input: str | None,
    *,
    replay: bool,
    verify: bool,
    as_json: bool,
    home: str | None,
) -> None:

    usage = "sds audit RELEASE_ID --replay --input PATH"
    if not replay:
        raise fail(f"--input is only used to replay a release: {usage}", 2)
    if verify:
        raise fail(f"--verify and --replay are separate audits; run one at a time: {usage}", 2)
    if release_id is None or input is None:
        missing = "the RELEASE_ID" if release_id is None else "--input PATH (the sensitive input)"
        raise fail(f"--replay needs {missing}: {usage}", 2)
    from sds_release.flows.local.launch import prefect_environment

    root = home_dir(home)
    prefect_environment(root)  # the stage tasks import Prefect (no server is started)
    from rich.console import Console
    from rich.table import Table

    from sds_release.flows.replay import replay_release
    from sds_release.store.run.progress import RichProgress, reporting

    console = Console(stderr=True)
    with RichProgress(f"replay {release_id}", console=console) as shown, reporting(shown):
        report = replay_release(root, release_id, input)
    if as_json:
        echo_json(report.to_dict())
    else:
        colour = {"match": "green", "differs": "red", "not recorded": "yellow", "note": "blue"}
        table = Table("stage", "compared", "result", "detail")
        for c in report.checks:
            table.add_row(c.stage, c.subject, f"[{colour[c.status]}]{c.status}[/]", c.detail)
        out = stdout_console()
        out.print(f"replay of release {report.release_id} (dataset {report.dataset})")
        print_table(out, table)
        if report.identical:
            out.print(
                "[green]identical: every published file is what the recorded method, "
                "parameters and release key produce from this input; nothing was charged[/green]"
            )
        else:
            out.print(
                f"[red]DIFFERS: {len(report.differences)} comparison(s) differ: "
                + "; ".join(f"{c.stage} {c.subject}" for c in report.differences)
                + "[/red]"
            )
    if not report.identical:
        raise typer.Exit(1)


def verify_command(
    release_dir: Annotated[
        str,
        typer.Argument(
            help="A published release directory (or a series folder), or a release's copy in "
            "a bucket: s3://BUCKET/PREFIX/RELEASE_ID (read with AWS_* variables or a profile)."
        ),
    ],
    public_key: Annotated[
        Path | None,
        typer.Option(
            "--public-key",
            help="The custodian's public key (signing-key.pub), obtained separately: proves "
            "who signed. Without it the release's own signing-key.pub is used.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check a downloaded release (or a series folder, `sds series`), or a release's copy in a
    bucket: its signature and every artifact's sha256.

    Needs only the release's files (no ledger, no private files); exits 1 on any problem.
    """
    from sds_core.errors import SdsInputError
    from sds_release.store.audit.signing import load_public_key

    key = None
    if public_key is not None:
        try:
            data = public_key.read_bytes()
        except OSError as e:
            raise SdsInputError(f"--public-key {public_key}: {e.strerror or e}") from None
        key = load_public_key(data, f"--public-key {public_key}")
    check, series = _verify(release_dir, key)
    if as_json:
        echo_json(check.to_dict() | ({"series": True} if series else {}))
    else:
        typer.echo(
            f"series of dataset {check.dataset}: {check.artifacts} files"
            if series
            else f"release {check.release_id} (dataset {check.dataset}): {check.artifacts} "
            "artifacts"
        )
        if check.signature_valid and check.key_source == "given":
            typer.echo(f"signature: valid, by the given key {check.key_id}")
        elif check.signature_valid:
            typer.echo(
                f"signature: valid, by the key shipped with the release {check.key_id}; this "
                "proves the files are unchanged since signing, not who signed them: compare "
                "the fingerprint with the one the custodian publishes, or pass --public-key"
            )
        for p in check.problems:
            typer.echo(f"problem: {p}")
        typer.echo("verified" if check.ok else "NOT verified")
    if not check.ok:
        raise typer.Exit(1)


def _verify(release_dir: str, key: Any) -> tuple[Any, bool]:
    """The check of a release directory or series folder (and whether it is a series), or of a
    release's copy in a bucket brought into a temporary directory (the check names the URL)."""
    import dataclasses
    import tempfile

    from sds_release.store.audit.signing import verify_signed_release
    from sds_release.store.series.files import is_series_dir, verify_series
    from sds_release.store.storage.bucket import download_release
    from sds_release.store.storage.urls import is_object_url
    from sds_release.store.workspace.home import MANIFEST

    if not is_object_url(release_dir):
        path = Path(release_dir)
        if is_series_dir(path) and not (path / MANIFEST).exists():
            return verify_series(path, key), True
        return verify_signed_release(path, key), False
    with tempfile.TemporaryDirectory(prefix="sds-verify-") as tmp:
        local = download_release(release_dir, Path(tmp) / "release")
        check = verify_signed_release(local, key)
        problems = tuple(p.replace(str(local), release_dir) for p in check.problems)
        return dataclasses.replace(check, release_dir=release_dir, problems=problems), False


def sign(release_id: str, home: HomeOpt = None) -> None:
    """Sign a complete release with the home's current key (older releases, or after rotation)."""
    from sds_release.store.audit.signing import sign_release
    from sds_release.store.workspace.integrity import verify_release

    root = home_dir(home)
    found = published_release(root, release_id)
    problems = verify_release(found)
    if problems:
        raise fail(
            f"release {release_id} is not intact, so it is not signed: {'; '.join(problems)}", 1
        )
    typer.echo(f"signed {found} with key {sign_release(root, found)}")


@key_app.command("show")
def key_show(home: HomeOpt = None, as_json: JsonOpt = False) -> None:
    """Print the home's public signing key and its fingerprint (created on first use)."""
    from sds_release.store.audit.signing import key_history, key_id, public_pem, signing_key

    root = home_dir(home)
    public = signing_key(root).public_key()
    if as_json:
        pem = public_pem(public).decode()
        echo_json({"key_id": key_id(public), "public_key": pem, "history": key_history(root)})
        return
    typer.echo(f"key id: {key_id(public)}")
    typer.echo(public_pem(public).decode().rstrip())


@key_app.command("rotate")
def key_rotate(home: HomeOpt = None) -> None:
    """Replace the home's signing key; releases signed before keep their old signature."""
    from sds_release.store.audit.signing import rotate_key

    old, new = rotate_key(home_dir(home))
    typer.echo(f"retired key: {old or '(none)'}")
    typer.echo(f"new key: {new}")
    typer.echo(
        "publish the new key's fingerprint where your users look for it; re-sign releases "
        "that should carry the new key with `sds sign RELEASE_ID`"
    )


def register(app: SdsTyper) -> None:
    """Add ``audit``, ``verify``, ``sign`` and the ``signing-key`` group to ``app``."""
    app.command()(audit)
    app.command("verify")(verify_command)
    app.command()(sign)
    app.add_typer(key_app, name="signing-key")
