"""The ``sds`` command line (typer + rich): release, resume, cancel, budget, server, audit,
ledger, report, evaluate, verify, sign and signing-key.

Thin front end of the ``release`` flow and the ledger. Prefect, GX and ``sds_core`` (whose
package import loads pandas) are imported inside the commands that need them, so ``sds --help``
stays fast (~0.2 s). ``release`` runs the pre-flight checks first (no Prefect or GX), then the
flow against ``PREFECT_API_URL`` or the home's local server (``flows/server.py``). Errors become
one paragraph on stderr and a non-zero exit; on success the last line printed is the release
directory.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

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
key_app = typer.Typer(no_args_is_help=True, help="The home's Ed25519 release-signing key.")
app.add_typer(key_app, name="signing-key")
ledger_app = typer.Typer(no_args_is_help=True, help="The privacy-budget ledger itself.")
app.add_typer(ledger_app, name="ledger")
server_app = typer.Typer(
    no_args_is_help=True, help="The local Prefect server (and UI) releases of a home reuse."
)
app.add_typer(server_app, name="server")

HomeOpt = Annotated[
    str | None, typer.Option("--home", help="SDS home (default $SDS_HOME or ./.sds).")
]
LedgerOpt = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        help="Ledger URL: sqlite:///PATH or postgresql://USER@HOST/DB (default "
        "$SDS_LEDGER_URL, else HOME/ledger.sqlite).",
    ),
]
VerboseOpt = Annotated[
    bool,
    typer.Option(
        "--verbose", "-v", help="Show the run's stage logs on stderr (they always go to Prefect)."
    ),
]

PREFECT_DEFAULTS = {
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_API_BLOCKS_REGISTER_ON_START": "false",
    # every stage's INFO line goes to the run's logs on the Prefect server (the UI's Logs tab);
    # the console handler below keeps the terminal quiet unless --verbose
    "PREFECT_LOGGING_LEVEL": "INFO",
    # failures reach the user as one paragraph from `fail`; Prefect's console tracebacks would
    # bury it (they stay in the run's logs on the server and in private/<id>/failure.json)
    "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "CRITICAL",
    "GX_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",  # Prefect's client-side telemetry (and its first-run notice on stderr)
}


def prefect_environment(home: Path, *, verbose: bool = False) -> None:
    """Working, local-only Prefect defaults (only where the user set nothing); before import.

    Without ``PREFECT_API_URL`` the flow runs against a temporary local server whose database
    lives in ``<home>/prefect`` unless ``PREFECT_HOME`` is set. An empty ``PREFECT_API_URL`` is
    removed: it breaks Prefect 3.8's event worker in that mode. ``verbose`` shows the run's
    INFO logs (the stage lines the server gets) on stderr too.
    """
    if verbose:
        os.environ["PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"] = "INFO"
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
        info = local_server.start(  # its worker waits for this release to end
            home, idle_timeout_s=local_server.DEFAULT_IDLE_MINUTES * 60, worker_after=os.getpid()
        )
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
    from release_store.run.progress import warning_line

    typer.echo(warning_line(message), err=True)


def _csv_list(value: str | None) -> list[str] | None:
    return None if value is None else [v.strip() for v in value.split(",") if v.strip()]


def _home(home: str | None) -> Path:
    from release_store.workspace.home import resolve_home
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
    synthesis: Annotated[
        str | None, typer.Option(help="aggregate-seeded mode: records (default) or model.")
    ] = None,
    max_model_bytes: Annotated[
        int | None, typer.Option(help="Memory limit of a fitted model (bytes).")
    ] = None,
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
    ledger: LedgerOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress output.")] = False,
    verbose: VerboseOpt = False,
    executor: Annotated[str | None, typer.Option(help="Counting: local (default) or dask.")] = None,
    dask_address: Annotated[
        str | None, typer.Option(help="Dask scheduler (tcp://host:8786; env SDS_DASK_ADDRESS).")
    ] = None,
    synthetic_records: Annotated[
        int | None, typer.Option(help="Synthetic records to make (default: the DP count).")
    ] = None,
) -> None:
    """Run one DP release of INPUT; prints the release directory last."""
    from release_store.config import build_params, load_config
    from sds_core.errors import SdsInputError

    try:
        cfg = load_config(config) if config is not None else {}
        overrides: dict[str, Any] = {
            "dataset": dataset,
            "epsilon": epsilon,
            "delta": delta,
            "reporting_length": reporting_length,
            "synthesizer": synthesizer,
            "synthesis": synthesis,
            "max_model_bytes": max_model_bytes,
            "seed": seed,
            "use_columns": _csv_list(use_columns),
            "sensitive_zeros": _csv_list(sensitive_zeros),
            "delimiter": delimiter,
            "record_limit": record_limit,
            "release_id": release_id,
            "home": home,
            "ledger": ledger,
            "input": str(Path(input).expanduser().absolute()),
            "executor": executor,
            "dask_address": dask_address,
            "synthetic_records": synthetic_records,
        }
        if "dataset" not in cfg and dataset is None:
            raise SdsInputError("no dataset id: pass --dataset ID or set dataset in the config")
        params = build_params(cfg, overrides)
        from release_store.inputs.ingest import check_input_path

        check_input_path(params.input)  # before any budget is reserved or Prefect started
    except SdsInputError as e:
        raise fail(str(e), 2) from None
    root = _home(params.home)
    from release_store.workspace.home import new_release_id

    params = params.model_copy(
        update={
            "home": str(root),
            "release_id": params.release_id or new_release_id(params.dataset),
        }
    )
    params = _ledger_password(params)  # before the pre-flight reads the ledger
    _preflight(params)
    _run(params, root, quiet=quiet, verbose=verbose)


def _ledger_password(params: Any) -> Any:
    """``params`` with the ledger URL's password moved to ``PGPASSWORD`` (Prefect stores the
    flow's parameters: never a password)."""
    from release_store.ledger.backends import split_password

    if params.ledger is None:
        return params
    url, password = split_password(params.ledger)
    if password is None:
        return params
    os.environ.setdefault("PGPASSWORD", password)
    return params.model_copy(update={"ledger": url})


def _preflight(params: Any) -> None:
    """The checks that need neither Prefect nor GX (release_store.inputs.preflight); warn about
    zeros."""
    from release_store.inputs.preflight import preflight, zero_warning
    from sds_core.errors import SdsInputError

    try:
        found = preflight(params)
    except SdsInputError as e:  # the text and exit status the flow would have failed with
        raise fail(f"release {params.release_id} failed: {e}", 1) from None
    if found.zero_shares:
        warn(zero_warning(found.zero_shares))


def _run(params: Any, root: Path, *, quiet: bool, verbose: bool = False) -> None:
    params = _ledger_password(params)
    server = _api_server(root)  # started in the background while Prefect and the flow load
    prefect_environment(root, verbose=verbose)
    if server is not None and server.healthy:  # the home's answering server: its warm worker
        from flows import handoff

        call = {
            "params": params.model_dump(mode="json"),
            "root": str(root),
            "quiet": quiet,
            "verbose": verbose,
        }
        code = handoff.hand_off(root, call)
        if code is not None:
            from flows import server as local_server

            local_server.touch(root)
            raise typer.Exit(code)
    _run_here(params, root, server, quiet=quiet, verbose=verbose)


def run_handed_off(call: dict[str, Any]) -> int:
    """In a child of the release worker (flows/worker.py): the release a client handed over,
    run as :func:`_run` runs it in-process; returns the exit status ``sds`` would end with."""
    import click

    from release_store.config.release_params import ReleaseParams

    params = ReleaseParams.model_validate(call["params"])
    try:
        _run_here(params, Path(call["root"]), None, quiet=call["quiet"], verbose=call["verbose"])
    except (typer.Exit, click.exceptions.Exit) as e:
        return int(e.exit_code)
    except KeyboardInterrupt:  # as typer's main ends a Ctrl-C: status 130, no message
        return 130
    return 0


def _run_here(params: Any, root: Path, server: Any, *, quiet: bool, verbose: bool) -> None:
    from release_store.inputs import gx_suite

    if params.table_schema is not None and "great_expectations" not in sys.modules:
        gx_suite.start_worker()  # GX imports on the other core while Prefect loads
    try:
        _run_flow(params, root, server, quiet=quiet, verbose=verbose)
    finally:
        gx_suite.stop_worker()


def _run_flow(params: Any, root: Path, server: Any, *, quiet: bool, verbose: bool) -> None:
    from rich.console import Console

    from flows.release import release as release_flow
    from release_store.run.progress import RichProgress, reporting
    from sds_core.errors import SdsInputError

    if server is not None:
        from flows import server as local_server

        try:
            local_server.wait_healthy(server)
        except RuntimeError as e:
            raise fail(f"{e}; or set SDS_SERVER=temporary to run without it", 1) from None
    console = Console(stderr=True, quiet=quiet)
    shown = RichProgress(  # the log lines replace the bar with --verbose
        f"release {params.release_id}", disable=quiet or verbose, console=console
    )
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
    ledger: LedgerOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    verbose: VerboseOpt = False,
) -> None:
    """Continue an unfinished release from its first unfinished stage (no double spend)."""
    from release_store.config.release_params import ReleaseParams
    from release_store.ledger.backends import LEDGER_URL_ENV, split_password
    from release_store.workspace.home import validate_id
    from sds_core.errors import SdsInputError

    try:
        validate_id(release_id)
    except SdsInputError as e:
        raise fail(str(e), 2) from None
    root = _home(home)
    saved = root / "private" / release_id / "params.json"
    if not saved.is_file():
        raise fail(f"no release {release_id!r} in {root} (no {saved}); check the id and --home", 2)
    data = json.loads(saved.read_text())
    seed_file = saved.parent / "seed.json"
    data["seed"] = json.loads(seed_file.read_text())["seed"] if seed_file.is_file() else None
    data["home"] = str(root)
    env_url = os.environ.get(LEDGER_URL_ENV)
    if ledger is not None:
        data["ledger"] = ledger
    elif data.get("ledger") is None:  # reserved in the home's own SQLite ledger
        data["ledger"] = default_url(root) if env_url else None
    elif env_url and split_password(env_url)[0] == data["ledger"]:
        data["ledger"] = env_url  # the same ledger, with the password the stored URL lacks
    _run(ReleaseParams.model_validate(data), root, quiet=quiet, verbose=verbose)


@app.command()
def cancel(release_id: str, home: HomeOpt = None, ledger: LedgerOpt = None) -> None:
    """Abandon an unfinished release: keep what its drawn stages spent, return the rest."""
    from release_store.ledger.book import Ledger
    from release_store.workspace.home import validate_id
    from release_store.workspace.manifest import discard_incomplete
    from sds_core.errors import SdsInputError

    root = _home(home)
    try:
        validate_id(release_id)
        res = Ledger.open(root, ledger).cancel(release_id)
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
    ledger: LedgerOpt = None,
) -> None:
    """Set a dataset's lifetime (ε, δ) budget."""
    from release_store.ledger.book import Ledger
    from release_store.workspace.home import validate_id
    from sds_core.errors import SdsInputError

    root = _home(home)
    try:
        validate_id(dataset, "dataset id")
        st = Ledger.open(root, ledger).set_budget(dataset, epsilon=epsilon, delta=delta)
    except SdsInputError as e:
        raise fail(str(e), 2) from None
    typer.echo(
        f"{dataset}: lifetime ε={st.epsilon_lifetime:.6g} δ={st.delta_lifetime:.3g}, "
        f"remaining ε={st.epsilon_remaining:.6g} δ={st.delta_remaining:.3g}"
    )
    if os.environ.get("PREFECT_API_URL"):  # a real server: refresh its budget dashboard
        _budget_to_prefect(root, dataset, ledger)


def _budget_to_prefect(root: Path, dataset: str, ledger: str | None = None) -> None:
    """The dataset's budget table artifact and events on the Prefect server (``budget set``)."""
    from release_store.ledger.budget_view import artifact_key

    prefect_environment(root)
    try:
        from prefect.events.worker import EventsWorker

        from tasks.artifacts import show_budget

        show_budget(root, dataset, ledger_url=ledger)
        quiet = logging.getLogger("EventsWorker")  # its "still processing" note while draining
        quiet.setLevel(logging.ERROR)
        EventsWorker.drain_all(timeout=30)
    except Exception as e:  # the budget is set; only the dashboard is behind
        key = artifact_key("budget", dataset)
        typer.echo(
            f"sds: warning: budget set, but the Prefect artifact {key} was not "
            f"updated ({type(e).__name__}: {e}); check PREFECT_API_URL",
            err=True,
        )
        return
    typer.echo(f"budget table artifact updated on {os.environ['PREFECT_API_URL']}")


@budget_app.command("show")
def budget_show(
    dataset: Annotated[str | None, typer.Argument()] = None,
    home: HomeOpt = None,
    ledger: LedgerOpt = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Show lifetime, spent, reserved and remaining budget per dataset."""
    from rich.console import Console
    from rich.table import Table

    from release_store.ledger.book import Ledger
    from sds_core.errors import SdsInputError

    try:
        book = Ledger.open(_home(home), ledger)
        rows = [book.budget(dataset)] if dataset else book.datasets()
    except SdsInputError as e:
        raise fail(str(e), 2) from None
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
        typer.Option("--input", help="With --replay: the input the release was made from."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    home: HomeOpt = None,
    ledger: LedgerOpt = None,
) -> None:
    """List releases and budgets; --verify checks the ledger chain and every artifact hash.

    `sds audit RELEASE_ID --replay --input PATH` recomputes that release and compares it with
    what was published; it exits 1 when anything differs.
    """
    from rich.console import Console
    from rich.table import Table

    if replay or input is not None:
        _replay(dataset, input, replay=replay, verify=verify, as_json=as_json, home=home)
        return
    from release_store.audit.home import audit_home as run_audit
    from release_store.workspace.home import validate_id
    from sds_core.errors import SdsInputError

    try:
        if dataset is not None:
            validate_id(dataset, "dataset id")
        report = run_audit(_home(home), dataset, verify=verify, ledger_url=ledger)
    except SdsInputError as e:
        raise fail(str(e), 2) from None
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        rows = report.table_rows()
        table = Table(*(rows[0].keys() if rows else ["release"]))
        for row in rows:
            table.add_row(*row.values())
        console = Console()
        console.print(table)
        for r in report.releases:
            if r.report:
                console.print(
                    f"report of {r.release_id}: {Path(r.report).as_uri()}", soft_wrap=True
                )
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
    typer.echo(_worker_line(local_server.wait_worker(info)))


def _worker_line(answer: dict[str, Any] | None) -> str:
    """How releases of the home run: through the warm worker or in-process."""
    from flows.handoff import WORKER_ENV, worker_enabled

    if answer is not None:
        return f"release worker: ready (pid {answer['pid']}); releases start warm"
    if not worker_enabled():
        return f"release worker: off ({WORKER_ENV}=off); releases run in-process"
    return "release worker: not running; releases run in-process"


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
    from flows.handoff import ping

    typer.echo(_worker_line(ping(root)))


@app.command("report")
def report_command(
    release_id: Annotated[str, typer.Argument(help="The release id (see `sds audit`).")],
    open_it: Annotated[
        bool, typer.Option("--open", help="Also open the report in the default browser.")
    ] = False,
    home: HomeOpt = None,
) -> None:
    """Print the path of a complete release's report.html (--open: open it in a browser)."""
    from release_store.audit.home import report_path
    from sds_core.errors import SdsInputError

    try:
        path = report_path(_home(home), release_id)
    except SdsInputError as e:
        raise fail(str(e), 2) from None
    if open_it:
        import webbrowser

        if not webbrowser.open(path.as_uri()):
            typer.echo(path)
            raise fail(f"no browser could be started to open {path}; open the file yourself", 1)
    typer.echo(path)


def _replay(
    release_id: str | None,
    input: str | None,
    *,
    replay: bool,
    verify: bool,
    as_json: bool,
    home: str | None,
) -> None:
    from sds_core.errors import SdsInputError

    usage = "sds audit RELEASE_ID --replay --input PATH"
    if not replay:
        raise fail(f"--input is only used to replay a release: {usage}", 2)
    if verify:
        raise fail(f"--verify and --replay are separate audits; run one at a time: {usage}", 2)
    if release_id is None or input is None:
        missing = "the RELEASE_ID" if release_id is None else "--input PATH (the sensitive input)"
        raise fail(f"--replay needs {missing}: {usage}", 2)
    root = _home(home)
    prefect_environment(root)  # the stage tasks import Prefect (no server is started)
    from rich.console import Console
    from rich.table import Table

    from flows.replay import replay_release
    from release_store.run.progress import RichProgress, reporting

    console = Console(stderr=True)
    try:
        with RichProgress(f"replay {release_id}", console=console) as shown, reporting(shown):
            report = replay_release(root, release_id, input)
    except SdsInputError as e:
        raise fail(str(e), 2) from None
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
    else:
        colour = {"match": "green", "differs": "red", "not recorded": "yellow", "note": "blue"}
        table = Table("stage", "compared", "result", "detail")
        for c in report.checks:
            table.add_row(c.stage, c.subject, f"[{colour[c.status]}]{c.status}[/]", c.detail)
        out = Console()
        out.print(f"replay of release {report.release_id} (dataset {report.dataset})")
        out.print(table)
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


@app.command("verify")
def verify_command(
    release_dir: Annotated[Path, typer.Argument(help="A published release directory.")],
    public_key: Annotated[
        Path | None,
        typer.Option(
            "--public-key",
            help="The custodian's public key (signing-key.pub), obtained separately: proves "
            "who signed. Without it the release's own signing-key.pub is used.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Check a downloaded release: its signature and every artifact's sha256.

    Needs only the release directory (no ledger, no private files); exits 1 on any problem.
    """
    from release_store.audit.signing import load_public_key, verify_signed_release
    from sds_core.errors import SdsInputError

    try:
        key = None
        if public_key is not None:
            try:
                data = public_key.read_bytes()
            except OSError as e:
                raise SdsInputError(f"--public-key {public_key}: {e.strerror or e}") from None
            key = load_public_key(data, f"--public-key {public_key}")
        check = verify_signed_release(release_dir, key)
    except SdsInputError as e:
        raise fail(str(e), 2) from None
    if as_json:
        typer.echo(json.dumps(check.to_dict(), indent=2))
    else:
        typer.echo(
            f"release {check.release_id} (dataset {check.dataset}): {check.artifacts} artifacts"
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


@app.command()
def sign(release_id: str, home: HomeOpt = None) -> None:
    """Sign a complete release with the home's current key (older releases, or after rotation)."""
    from release_store.audit.signing import sign_release
    from release_store.workspace.integrity import verify_release

    root = _home(home)
    found = sorted(root.glob(f"releases/*/{release_id}"))
    if not found:
        raise fail(f"no published release {release_id!r} in {root / 'releases'}", 2)
    problems = verify_release(found[0])
    if problems:
        raise fail(
            f"release {release_id} is not intact, so it is not signed: {'; '.join(problems)}", 1
        )
    typer.echo(f"signed {found[0]} with key {sign_release(root, found[0])}")


@key_app.command("show")
def key_show(
    home: HomeOpt = None, as_json: Annotated[bool, typer.Option("--json")] = False
) -> None:
    """Print the home's public signing key and its fingerprint (created on first use)."""
    from release_store.audit.signing import key_history, key_id, public_pem, signing_key

    root = _home(home)
    public = signing_key(root).public_key()
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "key_id": key_id(public),
                    "public_key": public_pem(public).decode(),
                    "history": key_history(root),
                },
                indent=2,
            )
        )
        return
    typer.echo(f"key id: {key_id(public)}")
    typer.echo(public_pem(public).decode().rstrip())


@key_app.command("rotate")
def key_rotate(home: HomeOpt = None) -> None:
    """Replace the home's signing key; releases signed before keep their old signature."""
    from release_store.audit.signing import rotate_key

    old, new = rotate_key(_home(home))
    typer.echo(f"retired key: {old or '(none)'}")
    typer.echo(f"new key: {new}")
    typer.echo(
        "publish the new key's fingerprint where your users look for it; re-sign releases "
        "that should carry the new key with `sds sign RELEASE_ID`"
    )


@ledger_app.command("migrate")
def ledger_migrate(
    to: Annotated[str, typer.Option("--to", help="Target ledger URL (e.g. postgresql://...).")],
    source: Annotated[
        str | None,
        typer.Option("--from", help="Source ledger URL (default: HOME/ledger.sqlite)."),
    ] = None,
    home: HomeOpt = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Copy the ledger to another URL row by row, verify it, and make the old one read-only."""
    from release_store.audit.home import audit_home as run_audit
    from release_store.ledger.book import Ledger
    from release_store.ledger.migration import migrate_ledger
    from sds_core.errors import SdsInputError

    root = _home(home)
    try:
        report = migrate_ledger(Ledger.from_url(source or default_url(root)), Ledger.from_url(to))
        audited = run_audit(root, verify=True, ledger_url=to)
    except (SdsInputError, RuntimeError) as e:
        raise fail(str(e), 2) from None
    if as_json:
        out = report.to_dict() | {"audit_ok": audited.ok, "audit_problems": audited.problems}
        typer.echo(json.dumps(out, indent=2))
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


def default_url(root: Path) -> str:
    """The home's own SQLite ledger URL."""
    from release_store.ledger.backends import default_ledger_url

    return default_ledger_url(root)


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


def main() -> None:  # pragma: no cover - the console entry point
    """Entry point of ``sds`` and ``python -m flows.cli``: the app, then :func:`quick_exit`."""
    try:
        app()
        code: int | str | None = 0
    except SystemExit as e:  # typer/click end every command this way
        code = e.code
    quick_exit(code)


def quick_exit(code: int | str | None) -> NoReturn:  # pragma: no cover - ends the process
    """End the process as a normal exit would, without tearing the interpreter down.

    Threads are joined and every exit handler runs first, in the interpreter's own order
    (Prefect drains its log and event queues to the server there); only the module teardown
    that follows is skipped: with Prefect, pandas and numba loaded it takes one to two seconds
    and changes nothing on disk or on the server.
    """
    import atexit
    import threading

    if isinstance(code, str):
        sys.stderr.write(code + "\n")
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # what Py_FinalizeEx calls first
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code or 0)


if __name__ == "__main__":  # pragma: no cover
    main()
