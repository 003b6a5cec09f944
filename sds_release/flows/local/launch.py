"""Launching a release on this machine: Prefect's environment, the home's server, the hand-off
to the warm runner, or the flow run in this process.

``sds release`` and ``sds resume`` call :func:`launch` once their options are read (``sds
release``'s pre-flight, :func:`release_checks`, runs here or in the warm runner's child); the warm
runner's child calls :func:`run_handed_off` with what the client sent. Prefect, GX and the flow are
imported only where a release runs here, so a release handed to the warm runner never loads them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import typer

from sds_release.flows.console import fail, warn
from sds_release.store.run.timing import mark, span

__all__ = [
    "PREFECT_DEFAULTS",
    "SERVER_ENV",
    "launch",
    "ledger_password",
    "prefect_environment",
    "preflight_checks",
    "release_checks",
    "run_handed_off",
    "seeded_warning",
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
    # Prefect's internal services (the events worker, the log batcher) print their errors on
    # stderr through the "debug" handler, e.g. one screenful per event while the home's server
    # restarts; the release goes on (its events are sent again on reconnection)
    "PREFECT_LOGGING_HANDLERS_DEBUG_LEVEL": "CRITICAL",
    # the supervisor restarts a killed home server on the same port and database
    # (sds_release/flows/local/supervisor.py; 6-31 s measured on 2 busy cores). Prefect 3.9.1's API
    # client (prefect/client/base.py, `send`) retries each request up to this many times, waiting
    # 2, 4, ... 128 s (±20% jitter; 254 s in all), on refused (only once that client has
    # connected once), reset, timed-out and broken connections and on 408/429/502/503. That
    # covers the flow run's own calls (its final state, the Prefect artifacts); the stages
    # themselves need no server (task states are sent as events in the background). A fresh
    # client whose first request is refused fails at once, and an outage longer than the
    # retries ends the call: launch.py then says what is kept and how to go on
    "PREFECT_CLIENT_MAX_RETRIES": "7",
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
        os.environ["PREFECT_LOGGING_HANDLERS_DEBUG_LEVEL"] = "0"  # Prefect's own default
    if os.environ.get("PREFECT_API_URL") == "":
        del os.environ["PREFECT_API_URL"]
    if "PREFECT_API_URL" not in os.environ:
        os.environ.setdefault("PREFECT_HOME", str(home / "prefect"))
    for key, value in PREFECT_DEFAULTS.items():
        os.environ.setdefault(key, value)


SERVER_ENV = "SDS_SERVER"
"""``auto`` (default): without ``PREFECT_API_URL``, run against the home's local server, started
in the background when absent; ``temporary``: Prefect's temporary server for this run only."""


def _configured() -> bool:
    """Whether Prefect has a server already: ``PREFECT_API_URL`` in the environment, or set in
    this process (prefect_test_harness, a notebook)."""
    if os.environ.get("PREFECT_API_URL"):
        return True
    if "prefect" in sys.modules:
        from prefect.settings import PREFECT_API_URL

        return bool(PREFECT_API_URL.value())
    return False


def _seed_temporary_database() -> None:
    """Prefect's temporary server (``SDS_SERVER=temporary``) on a new ``PREFECT_HOME`` starts
    from a copy of the database template, as a home's server does, instead of migrating an
    empty database (~8 CPU-s and ~10 s before the flow's first stage)."""
    from sds_release.flows.local.template import seed_database_in

    value = os.environ.get("PREFECT_HOME")  # set by prefect_environment when not by the user
    if value:
        folder = Path(value).expanduser()
        folder.mkdir(parents=True, exist_ok=True)  # under the release's umask 077: 0700
        seed_database_in(folder)


def _api_server(home: Path, before_start: Callable[[], None] = lambda: None) -> Any:
    """The home's local server the flow will use (started now if needed), or None.

    None when ``PREFECT_API_URL`` names a server, when Prefect is already configured in this
    process (the test harness), or with ``SDS_SERVER=temporary``. A server started here is
    announced once on stderr with how to stop it; ``before_start`` runs first.
    """

    if _configured():
        return None
    mode = os.environ.get(SERVER_ENV, "auto").strip().lower()
    if mode == "temporary":
        return None
    if mode != "auto":
        raise fail(f"{SERVER_ENV}={mode!r} is not valid: use 'auto' or 'temporary'", 2)
    from sds_release.flows.local import server as local_server

    info = local_server.status(home)
    if info is None:
        before_start()  # the pre-flight: a refused release starts no server
        info = local_server.start(  # its runner waits for this release to end
            home, idle_timeout_s=local_server.DEFAULT_IDLE_MINUTES * 60, runner_after=os.getpid()
        )
        mark("client:server-spawned")
        warn(f"started a {info.describe()}. Later releases reuse it.")
    os.environ.update(local_server.client_env(home, info))  # the URL and the home's credential
    os.environ.setdefault("PREFECT_HOME", str(local_server.server_dir(home)))
    local_server.touch(home)
    return info


def ledger_password(params: Any) -> Any:
    """``params`` with the ledger URL's password moved to ``PGPASSWORD`` (Prefect stores the
    flow's parameters: never a password)."""
    from sds_release.store.ledger.backends import split_password

    if params.ledger is None:
        return params
    url, password = split_password(params.ledger)
    if password is None:
        return params
    os.environ.setdefault("PGPASSWORD", password)
    return params.model_copy(update={"ledger": url})


def launch(
    params: Any, root: Path, *, quiet: bool, verbose: bool = False, checks: bool = False
) -> None:
    """Run the release ``params`` describes: through the home's warm runner when its server
    answers, else in this process; returns when it is complete, raises typer.Exit otherwise.

    ``checks`` (``sds release``): its pre-flight (:func:`release_checks`) runs first, before
    any server is started and before anything is reserved; handed to the warm runner, in its
    child (which has imported what the checks need) before the flow, else here.
    """
    mark("client:launch")  # options and config are read
    params = ledger_password(params)  # before the pre-flight reads the ledger
    pending = [params] if checks else []

    def check_here() -> None:
        while pending:
            release_checks(pending.pop())

    # the server (started in the background while Prefect and the flow load); the checks first
    server = _api_server(root, before_start=check_here)
    prefect_environment(root, verbose=verbose)
    if server is not None and server.healthy:  # the home's answering server: its warm runner
        from sds_release.flows.local import handoff

        call = {
            "params": params.model_dump(mode="json"),
            "root": str(root),
            "quiet": quiet,
            "verbose": verbose,
            "checks": bool(pending),
        }
        code = handoff.hand_off(root, call)
        if code is not None:
            from sds_release.flows.local import server as local_server

            local_server.touch(root)
            raise typer.Exit(code)
    check_here()
    _run_here(params, root, server, quiet=quiet, verbose=verbose)


def release_checks(params: Any) -> None:
    """``sds release``'s pre-flight (:func:`preflight_checks`), then :func:`seeded_warning`."""
    preflight_checks(params)
    seeded_warning(params)
    mark("checks:done")


def seeded_warning(params: Any) -> None:
    """Warn once, on stderr, that a release made with ``seed`` is not private."""
    from sds_release.store.run.claims import not_private_reason

    reason = not_private_reason(params)
    if reason is not None:
        warn(reason)


def preflight_checks(params: Any) -> None:
    """The checks that need neither Prefect nor GX (:mod:`sds_release.store.inputs.preflight`;
    with ``privacy_risk`` first anonymeter's environment); warns about columns whose '0' cells
    look like values."""
    from sds_core.errors import SdsInputError
    from sds_release.flows.refusals import refusals
    from sds_release.store.audit.journal import RunOrigin, note_refused, user_at_host
    from sds_release.store.compare.risk import anonymeter_python
    from sds_release.store.inputs.preflight import preflight, zero_warning
    from sds_release.store.ledger.values import BUDGET_REFUSALS

    def told(e: SdsInputError) -> BaseException:
        """The text and exit status the flow would have failed with."""
        if isinstance(e, BUDGET_REFUSALS):  # the audit page lists it
            note_refused(params, RunOrigin("cli", user=user_at_host()), e)
        return fail(f"release {params.release_id} failed: {e}", 1)

    with refusals(told):
        if params.privacy_risk:
            anonymeter_python()
        found = preflight(params)
    if found.zero_shares:
        warn(zero_warning(found.zero_shares))


def _column_warnings(release_dir: Path) -> list[str]:
    """The published evaluation's column warnings (records that leave a column empty or miss
    its DP 1-way counts), said once after the release: one line per kind naming the columns
    (the report has each beside its column); none when there are none or it cannot be read."""
    try:
        evaluation = json.loads((release_dir / "evaluation.json").read_text())
    except (OSError, ValueError):
        return []
    metrics = evaluation.get("metrics", evaluation) if isinstance(evaluation, dict) else {}
    warned = [w for w in metrics.get("warnings") or [] if isinstance(w, dict)]
    lines = []
    for kind, what in (
        ("empty", "leave these columns empty more often than their DP counts imply"),
        ("outside_noise", "miss the DP 1-way counts by more than the noise for over 10% of "
         "the values of these columns"),
    ):  # fmt: skip
        cols = [str(w.get("column")) for w in warned if w.get("kind") == kind]
        if cols:
            better = str(warned[0].get("message", "")).rsplit("; ", 1)[-1]
            lines.append(
                f"the synthetic records {what}: {', '.join(cols)} (report.html shows each); "
                f"{better}"
            )
    return lines


def run_handed_off(call: dict[str, Any]) -> int:
    """In a child of the warm runner (:mod:`sds_release.flows.local.runner`): the release a client
    handed over, run as :func:`launch` runs it in-process; returns the exit status ``sds`` would end
    with."""
    import click

    from sds_release.store.config.release_params import ReleaseParams

    params = ReleaseParams.model_validate(call["params"])
    try:
        if call.get("checks"):  # sds release's pre-flight, which the client left to this child
            release_checks(params)
        _run_here(params, Path(call["root"]), None, quiet=call["quiet"], verbose=call["verbose"])
    except (typer.Exit, click.exceptions.Exit) as e:
        return int(e.exit_code)
    except KeyboardInterrupt:  # as typer's main ends a Ctrl-C: status 130, no message
        return 130
    return 0


STOPPED_STATUS = 128 + signal.SIGTERM
"""The exit status of a release stopped by SIGTERM (a shell's status for a process it ended)."""


class _Stopped(BaseException):
    """SIGTERM reached the release process (a BaseException, like KeyboardInterrupt)."""


@contextlib.contextmanager
def _sigterm_stops() -> Iterator[None]:
    """SIGTERM raises :class:`_Stopped` here instead of ending the process at once.

    While the flow runs, Prefect's own handler turns SIGTERM into ``TerminationSignal`` (the
    flow records the failure, keeps the reservation open when a stage was charged, and the run
    turns Crashed), then sends SIGTERM again to the handler it found, this one; so the caller
    can say what happened and how to continue. A SIGTERM the process ignores stays ignored.
    """

    def stop(signum: int, frame: object) -> None:
        raise _Stopped(signum)

    try:
        previous = signal.getsignal(signal.SIGTERM)
        if previous is signal.SIG_IGN:
            yield
            return
        signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread (a notebook's): SIGTERM stays as it is
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


HEARTBEAT_ENV = ("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "PREFECT_RUNNER_HEARTBEAT_FREQUENCY")
"""Prefect's flow-run heartbeat settings; a user who sets one keeps the heartbeats it asks for."""


@contextlib.contextmanager
def _no_heartbeats() -> Iterator[None]:
    """This command's flow run without Prefect's flow-run heartbeats, unless the user set them.

    Prefect 3.9.1 emits them by default (``flows.heartbeat_frequency`` = 180 s) from a thread
    that sleeps in whole seconds and is joined when the flow returns: the run ended 0-1 s
    (uniformly) after its last line (``git show 78ca7e7:docs/benchmarks.md``). They feed
    only an automation that marks deployment runs Crashed when they stop; a release run by
    ``sds release`` or ``sds resume`` is no deployment run, and its process reports its own end.
    """
    if any(os.environ.get(name) for name in HEARTBEAT_ENV):
        yield
        return
    from prefect.context import SettingsContext, get_settings_context

    # what prefect.settings.temporary_settings does, without its rebuild of every setting from
    # the environment (25 ms idle; a copy of the two models here: 0.1 ms)
    current = get_settings_context()
    flows = current.settings.flows.model_copy(update={"heartbeat_frequency": None})
    settings = current.settings.model_copy(update={"flows": flows})
    with SettingsContext(profile=current.profile, settings=settings):
        yield


def _run_here(params: Any, root: Path, server: Any, *, quiet: bool, verbose: bool) -> None:
    """Run the release in this process, everything it writes private to the home's owner (the
    umask 077: files 0600, folders 0700; also a temporary Prefect server's database)."""
    from sds_release.store.inputs import gx_suite
    from sds_release.store.workspace.home import private_umask

    with private_umask():
        if params.table_schema is not None and "great_expectations" not in sys.modules:
            gx_suite.start_checker()  # GX imports on the other core while Prefect loads
        if server is None and not _configured():  # the flow will start Prefect's temporary server
            _seed_temporary_database()
        try:
            _run_flow(params, root, server, quiet=quiet, verbose=verbose)
        finally:
            gx_suite.stop_checker()


def import_flow_call() -> None:
    """Import what calling the release flow imports on its first call: Prefect's engine, its
    flow visualisation and parameter serializer (FastAPI's), pyarrow's Parquet writer (publish).
    ~0.3 s the home's warm runner pays before it forks and a first release while it waits for
    the server it started, instead of after the server answered."""
    import fastapi.encoders  # noqa: F401  (prefect.flows.serialize_parameters)
    import prefect.flow_engine
    import prefect.utilities.visualization  # noqa: F401  (prefect.flows.Flow.__call__)
    import pyarrow.parquet  # noqa: F401


def _run_flow(params: Any, root: Path, server: Any, *, quiet: bool, verbose: bool) -> None:
    from rich.console import Console

    from sds_release.flows.release import release as release_flow
    from sds_release.store.run.progress import RichProgress, reporting
    from sds_release.store.run.resume import resume_hint

    mark("client:flow-imported")  # Prefect, the flow and its modules
    if server is not None:
        from sds_release.flows.local import server as local_server

        if not server.healthy:  # started by this release: use the wait for what the run pays
            from sds_core.marginals.warmup import load_kernels

            with span("client:load-kernels"):
                load_kernels()  # else in aggregate-1
                import_flow_call()
        try:
            local_server.wait_healthy(server)
        except RuntimeError as e:
            raise fail(f"{e}; or set SDS_SERVER=temporary to run without it", 1) from None
        mark("client:server-answered")
    console = Console(stderr=True, quiet=quiet)
    shown = RichProgress(  # the log lines replace the bar with --verbose
        f"release {params.release_id}", disable=quiet or verbose, console=console
    )
    released: str | None = None
    try:
        with _sigterm_stops(), _no_heartbeats(), shown, reporting(shown):
            mark("child:flow-call")
            state = release_flow(params, return_state=True)
            mark("child:flow-returned")
    except _Stopped:
        raise fail(
            f"release {params.release_id} was stopped by SIGTERM before it completed; "
            f"{resume_hint(root, params.release_id)}",
            STOPPED_STATUS,
        ) from None
    except Exception as e:  # the engine itself could not reach the API (the run's states)
        lost = _server_lost(e)
        if lost is None:
            raise
        released = _after_lost_server(params.release_id, root, lost)
    finally:
        if server is not None:
            local_server.touch(root)
    if released is None:
        released = _released(params.release_id, root, state)
    console.print(f"[green]release {params.release_id} complete[/green]")
    for line in _column_warnings(Path(str(released))):
        warn(line)
    typer.echo(released)


def _released(release_id: str, root: Path, state: Any) -> str:
    """The release directory of a completed run's ``state``; a failed run's one paragraph."""
    from sds_core.errors import SdsInputError
    from sds_release.store.ledger.backends import LedgerUnavailableError
    from sds_release.store.run.resume import resume_hint

    if state.is_completed():
        return str(state.result())
    error = state.result(raise_on_failure=False)
    if not isinstance(error, BaseException):
        raise fail(f"release {release_id} failed: {state.message}", 1)
    lost = _server_lost(error)
    if lost is not None:  # a task's call to the API failed inside the run
        return _after_lost_server(release_id, root, lost)
    message = str(error) if isinstance(error, SdsInputError) else f"{type(error).__name__}: {error}"
    if isinstance(error, LedgerUnavailableError):  # passing: the release can go on
        message += f"; {resume_hint(root, release_id)}"
    raise fail(f"release {release_id} failed: {message}", 1)


def _server_lost(error: BaseException) -> BaseException | None:
    """The error (``error`` or one of its causes) saying the Prefect API stopped answering once
    the client's retries ran out (refused, reset, timed out, or a 5xx answer), or None."""
    import httpx

    from sds_release.store.run.failure import error_chain

    for e in error_chain(error):
        if isinstance(e, httpx.TransportError):
            return e
        if isinstance(e, httpx.HTTPStatusError) and e.response.status_code >= 500:
            return e
    return None


def _after_lost_server(release_id: str, root: Path, error: BaseException) -> str:
    """The Prefect server stopped answering during release ``release_id`` (``error``, after the
    client's retries). The stages need no server (Prefect 3 sends task states as events), so the
    release may be complete on disk: then its directory is returned, with a warning that the
    server missed the run's end. Otherwise the release fails, saying how to continue it."""
    from sds_release.store.run.resume import release_manifest, resume_hint

    url = os.environ.get("PREFECT_API_URL", "the Prefect API")
    why = f"the Prefect server at {url} stopped answering ({type(error).__name__}: {error})"
    found, manifest = release_manifest(root, release_id)
    if found is not None and manifest is not None and manifest.get("status") == "complete":
        warn(
            f"{why}, so its run of release {release_id} shows as still running there; the "
            "release itself is complete and published"
        )
        return str(found)
    raise fail(
        f"release {release_id} failed: {why}; {resume_hint(root, release_id)}, once the "
        "server answers (`sds server status` shows it)",
        1,
    )
