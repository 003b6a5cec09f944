"""The ``sds`` command (typer + rich): release, resume, cancel, budget, server, audit, evaluate.

Thin front end of the ``release`` flow and the ledger. Prefect, GX and ``sds_core`` (whose
package import loads pandas) are imported inside the commands that need them, so ``sds --help``
stays fast (~0.2 s). ``release`` runs the pre-flight checks first (no Prefect or GX), then the
flow against ``PREFECT_API_URL`` or the home's local server (``flows/server.py``). Errors become
one paragraph on stderr and a non-zero exit; on success the last line printed is the release
directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(
    name="sds",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Differentially private data releases (SDS marginals + synthetic data) with a "
    "privacy-budget ledger.",
)
budget_app = typer.Typer(no_args_is_help=True, help="Lifetime privacy budgets per dataset.")
app.add_typer(budget_app, name="budget")
server_app = typer.Typer(
    no_args_is_help=True, help="The local Prefect server (and UI) releases of a home reuse."
)
app.add_typer(server_app, name="server")

HomeOpt = Annotated[
    str | None, typer.Option("--home", help="SDS home (default $SDS_HOME or ./.sds).")
]

PREFECT_DEFAULTS = {
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_API_BLOCKS_REGISTER_ON_START": "false",
    "PREFECT_LOGGING_LEVEL": "WARNING",
    # failures reach the user as one paragraph from `fail`; Prefect's console tracebacks would
    # bury it (they stay in the run's logs on the server and in private/<id>/failure.json)
    "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "CRITICAL",
    "GX_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",  # Prefect's client-side telemetry (and its first-run notice on stderr)
}


def prefect_environment(home: Path) -> None:
    """Working, local-only Prefect defaults (only where the user set nothing); before import.

    Without ``PREFECT_API_URL`` the flow runs against a temporary local server whose database
    lives in ``<home>/prefect`` unless ``PREFECT_HOME`` is set. An empty ``PREFECT_API_URL`` is
    removed: it breaks Prefect 3.8's event worker in that mode.
    """
    if os.environ.get("PREFECT_API_URL") == "":
        del os.environ["PREFECT_API_URL"]
    if "PREFECT_API_URL" not in os.environ:
        os.environ.setdefault("PREFECT_HOME", str(home / "prefect"))
    for key, value in PREFECT_DEFAULTS.items():
        os.environ.setdefault(key, value)


SERVER_ENV = "SDS_SERVER"
"""``auto`` (default): without ``PREFECT_API_URL``, run against the home's local server, started
in the background when absent; ``temporary``: Prefect's temporary server for this run only."""


def _api_server(home: Path) -> Any:
    """The home's local server the flow will use (started now if needed), or None.

    None when ``PREFECT_API_URL`` names a server, when Prefect is already configured in this
    process (the test harness), or with ``SDS_SERVER=temporary``. A server started here is
    announced once on stderr with how to stop it.
    """
    import sys

    if os.environ.get("PREFECT_API_URL"):
        return None
    if "prefect" in sys.modules:  # configured in-process (prefect_test_harness, a notebook)
        from prefect.settings import PREFECT_API_URL

        if PREFECT_API_URL.value():
            return None
    mode = os.environ.get(SERVER_ENV, "auto").strip().lower()
    if mode == "temporary":
        return None
    if mode != "auto":
        raise fail(f"{SERVER_ENV}={mode!r} is not valid: use 'auto' or 'temporary'", 2)
    from flows import server as local_server

    info = local_server.status(home)
    if info is None:
        info = local_server.start(home, idle_timeout_s=local_server.DEFAULT_IDLE_MINUTES * 60)
        warn(f"started a {info.describe()}. Later releases reuse it.")
    os.environ["PREFECT_API_URL"] = info.api_url
    os.environ.setdefault("PREFECT_HOME", str(local_server.server_dir(home)))
    local_server.touch(home)
    return info


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print one paragraph to stderr; return the Exit to raise."""
    typer.echo(f"sds: error: {' '.join(str(message).split())}", err=True)
    return typer.Exit(code)


def warn(message: str) -> None:
    """Print one warning paragraph to stderr (shown with --quiet too)."""
    typer.echo(f"sds: warning: {' '.join(str(message).split())}", err=True)


def _csv_list(value: str | None) -> list[str] | None:
    return None if value is None else [v.strip() for v in value.split(",") if v.strip()]


def _home(home: str | None) -> Path:
    from release_store.workspace import resolve_home
    from sds_core.errors import SdsInputError

    try:
        return resolve_home(home)
    except SdsInputError as e:
        raise fail(str(e), 2) from None


@app.command()
def release(
    input: Annotated[str, typer.Argument(help="Sensitive table: CSV (header row) or Parquet.")],
    dataset: Annotated[str | None, typer.Option(help="Dataset id (budget is per dataset).")] = None,
    config: Annotated[Path | None, typer.Option(help="TOML release configuration.")] = None,
    epsilon: Annotated[float | None, typer.Option(help="Privacy loss ε of this release.")] = None,
    delta: Annotated[float | None, typer.Option(help="δ (default: from the schema).")] = None,
    reporting_length: Annotated[int | None, typer.Option(help="Longest combination R.")] = None,
    synthesizer: Annotated[str | None, typer.Option(help="Synthesizer name.")] = None,
    seed: Annotated[int | None, typer.Option(help="Testing only: derive the key.")] = None,
    use_columns: Annotated[str | None, typer.Option(help="Comma-separated columns.")] = None,
    sensitive_zeros: Annotated[
        str | None,
        typer.Option(help="Columns where '0' is a value, not an empty cell: a,b or 'all'."),
    ] = None,
    delimiter: Annotated[str | None, typer.Option(help="CSV delimiter (default ',').")] = None,
    record_limit: Annotated[int | None, typer.Option(help="Use the first N rows only.")] = None,
    release_id: Annotated[str | None, typer.Option(help="Release id (default: new).")] = None,
    home: HomeOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress output.")] = False,
) -> None:
    """Run one DP release of INPUT; prints the release directory last."""
    from release_store.params import build_params, load_config
    from sds_core.errors import SdsInputError

    try:
        cfg = load_config(config) if config is not None else {}
        overrides: dict[str, Any] = {
            "dataset": dataset,
            "epsilon": epsilon,
            "delta": delta,
            "reporting_length": reporting_length,
            "synthesizer": synthesizer,
            "seed": seed,
            "use_columns": _csv_list(use_columns),
            "sensitive_zeros": _csv_list(sensitive_zeros),
            "delimiter": delimiter,
            "record_limit": record_limit,
            "release_id": release_id,
            "home": home,
            "input": str(Path(input).expanduser().absolute()),
        }
        if "dataset" not in cfg and dataset is None:
            raise SdsInputError("no dataset id: pass --dataset ID or set dataset in the config")
        params = build_params(cfg, overrides)
        from release_store.ingest import check_input_path

        check_input_path(params.input)  # before any budget is reserved or Prefect started
    except SdsInputError as e:
        raise fail(str(e), 2) from None
    root = _home(params.home)
    from release_store.workspace import new_release_id

    params = params.model_copy(
        update={
            "home": str(root),
            "release_id": params.release_id or new_release_id(params.dataset),
        }
    )
    _preflight(params)
    _run(params, root, quiet=quiet)


def _preflight(params: Any) -> None:
    """The checks that need neither Prefect nor GX (release_store.preflight); warn about zeros."""
    from release_store.preflight import preflight, zero_warning
    from sds_core.errors import SdsInputError

    try:
        found = preflight(params)
    except SdsInputError as e:  # the text and exit status the flow would have failed with
        raise fail(f"release {params.release_id} failed: {e}", 1) from None
    if found.zero_shares:
        warn(zero_warning(found.zero_shares))


def _run(params: Any, root: Path, *, quiet: bool) -> None:
    server = _api_server(root)  # started in the background while Prefect and the flow load
    prefect_environment(root)
    from release_store import gx_suite

    if params.table_schema is not None:
        gx_suite.start_worker()  # GX imports on the other core while Prefect loads
    try:
        _run_flow(params, root, server, quiet=quiet)
    finally:
        gx_suite.stop_worker()


def _run_flow(params: Any, root: Path, server: Any, *, quiet: bool) -> None:
    from rich.console import Console

    from flows.release import release as release_flow
    from release_store.progress import RichProgress, reporting
    from sds_core.errors import SdsInputError

    if server is not None:
        from flows import server as local_server

        try:
            local_server.wait_healthy(server)
        except RuntimeError as e:
            raise fail(f"{e}; or set SDS_SERVER=temporary to run without it", 1) from None
    console = Console(stderr=True, quiet=quiet)
    shown = RichProgress(f"release {params.release_id}", disable=quiet, console=console)
    try:
        with shown, reporting(shown):
            state = release_flow(params, return_state=True)
    finally:
        if server is not None:
            local_server.touch(root)
    if not state.is_completed():
        error = state.result(raise_on_failure=False)
        message = str(error) if isinstance(error, BaseException) else str(state.message)
        if not isinstance(error, SdsInputError):
            message = (
                f"{type(error).__name__}: {message}"
                if isinstance(error, BaseException)
                else message
            )
        raise fail(f"release {params.release_id} failed: {message}", 1)
    console.print(f"[green]release {params.release_id} complete[/green]")
    typer.echo(state.result())


@app.command()
def resume(
    release_id: str,
    home: HomeOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """Continue an unfinished release from its first unfinished stage (no double spend)."""
    from release_store.params import ReleaseParams

    root = _home(home)
    saved = root / "private" / release_id / "params.json"
    if not saved.is_file():
        raise fail(f"no release {release_id!r} in {root} (no {saved}); check the id and --home", 2)
    data = json.loads(saved.read_text())
    seed_file = saved.parent / "seed.json"
    data["seed"] = json.loads(seed_file.read_text())["seed"] if seed_file.is_file() else None
    data["home"] = str(root)
    _run(ReleaseParams.model_validate(data), root, quiet=quiet)


@app.command()
def cancel(release_id: str, home: HomeOpt = None) -> None:
    """Abandon an unfinished release: keep what its drawn stages spent, return the rest."""
    from release_store.ledger import Ledger
    from release_store.workspace import discard_incomplete
    from sds_core.errors import SdsInputError

    root = _home(home)
    try:
        res = Ledger.open(root).cancel(release_id)
    except SdsInputError as e:
        raise fail(str(e), 2) from None
    for d in (root / "releases").glob(f"*/{release_id}"):
        discard_incomplete(d, reason="cancelled")
    typer.echo(
        f"cancelled {release_id}: spent ε={res.epsilon_spent:.6g} δ={res.delta_spent:.3g},"
        f" returned ε={res.epsilon_returned:.6g} δ={res.delta_returned:.3g}"
    )


@budget_app.command("set")
def budget_set(
    dataset: str,
    epsilon: Annotated[float, typer.Option(help="Lifetime ε.")],
    delta: Annotated[float, typer.Option(help="Lifetime δ.")] = 1e-5,
    home: HomeOpt = None,
) -> None:
    """Set a dataset's lifetime (ε, δ) budget."""
    from release_store.ledger import Ledger
    from sds_core.errors import SdsInputError

    try:
        st = Ledger.open(_home(home)).set_budget(dataset, epsilon=epsilon, delta=delta)
    except SdsInputError as e:
        raise fail(str(e), 2) from None
    typer.echo(
        f"{dataset}: lifetime ε={st.epsilon_lifetime:.6g} δ={st.delta_lifetime:.3g}, "
        f"remaining ε={st.epsilon_remaining:.6g} δ={st.delta_remaining:.3g}"
    )


@budget_app.command("show")
def budget_show(
    dataset: Annotated[str | None, typer.Argument()] = None,
    home: HomeOpt = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Show lifetime, spent, reserved and remaining budget per dataset."""
    from rich.console import Console
    from rich.table import Table

    from release_store.ledger import Ledger

    ledger = Ledger.open(_home(home))
    rows = [ledger.budget(dataset)] if dataset else ledger.datasets()
    rows = [r for r in rows if r is not None]
    if dataset and not rows:
        raise fail(
            f"dataset {dataset!r} has no budget; set one with `sds budget set {dataset} "
            "--epsilon E`",
            1,
        )
    if as_json:
        typer.echo(json.dumps([r.to_dict() for r in rows], indent=2))
        return
    table = Table("dataset", "ε lifetime", "ε spent", "ε reserved", "ε left", "δ left")
    for r in rows:
        table.add_row(
            r.dataset,
            f"{r.epsilon_lifetime:.6g}",
            f"{r.epsilon_spent:.6g}",
            f"{r.epsilon_reserved:.6g}",
            f"{r.epsilon_remaining:.6g}",
            f"{r.delta_remaining:.3g}",
        )
    Console().print(table)


@app.command()
def audit(
    dataset: Annotated[str | None, typer.Argument()] = None,
    verify: Annotated[bool, typer.Option("--verify", help="Check hashes and chain.")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    home: HomeOpt = None,
) -> None:
    """List releases and budgets; --verify checks the ledger chain and every artifact hash."""
    from rich.console import Console
    from rich.table import Table

    from release_store.audit import audit_home as run_audit

    report = run_audit(_home(home), dataset, verify=verify)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        rows = report.table_rows()
        table = Table(*(rows[0].keys() if rows else ["release"]))
        for row in rows:
            table.add_row(*row.values())
        console = Console()
        console.print(table)
        for p in report.problems:
            console.print(f"[red]problem:[/red] {p}")
        if verify and report.ok:
            console.print("[green]verified: ledger chain and all artifacts intact[/green]")
    if verify and not report.ok:
        raise typer.Exit(1)


@server_app.command("start")
def server_start(
    home: HomeOpt = None,
    port: Annotated[int | None, typer.Option(help="Port (default 4200 when free).")] = None,
    idle_timeout: Annotated[
        float | None, typer.Option(help="Stop after this many minutes without a release.")
    ] = None,
) -> None:
    """Start the home's Prefect server in the background (database in $SDS_HOME/prefect)."""
    from flows import server as local_server

    root = _home(home)
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
    typer.echo(f"PREFECT_API_URL={info.api_url}")


@server_app.command("stop")
def server_stop(home: HomeOpt = None) -> None:
    """Stop the home's Prefect server (its runs and artifacts stay in the database)."""
    from flows import server as local_server

    root = _home(home)
    info = local_server.stop(root)
    typer.echo(f"stopped the Prefect server of {root}" if info else f"no server running for {root}")


@server_app.command("status")
def server_status(home: HomeOpt = None) -> None:
    """Show the home's Prefect server (exit status 1 when none is running)."""
    from flows import server as local_server

    root = _home(home)
    info = local_server.status(root)
    if info is None:
        typer.echo(f"no server running for {root}; start one with `sds server start`")
        raise typer.Exit(1)
    state = "answering" if info.healthy else "starting"
    typer.echo(f"{state}: {info.describe()}")
    typer.echo(f"PREFECT_API_URL={info.api_url}")


@app.command()
def evaluate(
    original: Annotated[str, typer.Argument(help="The sensitive table (CSV or Parquet).")],
    synthetic: Annotated[str, typer.Argument(help="The synthetic table, e.g. synthetic.csv.")],
    reporting_length: Annotated[int, typer.Option(min=1, help="Longest combination.")] = 3,
    config: Annotated[
        Path | None,
        typer.Option(
            help="Release config: preprocess ORIGINAL as the release did (columns, zeros, bins)."
        ),
    ] = None,
    resolution: Annotated[int, typer.Option(min=1, help="k of the preservation metrics.")] = 10,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    delimiter: Annotated[str | None, typer.Option(help="CSV delimiter (default ',').")] = None,
) -> None:
    """Compare SYNTHETIC with ORIGINAL: SDS aggregate metrics and marginal TVD (NOT DP)."""
    from release_store.compare import compare_tables, summary_lines
    from sds_core.errors import SdsInputError

    try:
        result = compare_tables(
            original,
            synthetic,
            reporting_length=reporting_length,
            resolution=resolution,
            config=config,
            delimiter=delimiter,
        )
    except SdsInputError as e:
        raise fail(str(e), 2) from None
    if as_json:
        typer.echo(json.dumps(result, indent=2, default=str))
        return
    for line in summary_lines(result):
        typer.echo(line)


def main() -> None:  # pragma: no cover - console entry point alias
    """Entry point (``python -m flows.cli``)."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
