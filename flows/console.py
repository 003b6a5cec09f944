"""What ``sds`` prints and how it ends: one-paragraph errors, warnings, the quick exit.

Used by the command line (:mod:`flows.cli`) and by the release it launches
(:mod:`flows.local.launch`), in-process or in a child of the warm runner, so a failure reads
the same wherever the release ran.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import typer

__all__ = ["fail", "quick_exit", "warn"]


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print one paragraph to stderr; return the Exit to raise."""
    typer.echo(f"sds: error: {' '.join(str(message).split())}", err=True)
    return typer.Exit(code)


def warn(message: str) -> None:
    """Print one warning paragraph to stderr (shown with --quiet too)."""
    from release_store.run.progress import warning_line

    typer.echo(warning_line(message), err=True)


EXIT_DRAIN_S = 15.0
"""How long the end of the process waits for Prefect's log and event queues to reach the
server. It takes milliseconds when the server answers. A server that stopped answering made the
exit wait for each queued batch's requests in turn (~2 minutes measured after a complete release
whose server was killed, its port still held): beyond this the rest is dropped, and the release
has already said that the server missed its end."""


def _drain_prefect(timeout: float) -> bool:
    """Drain Prefect's queue services (logs, events) for at most ``timeout`` seconds; False when
    some did not finish (Prefect not imported, or its internals not as expected: True, and the
    normal exit drains them)."""
    services = sys.modules.get("prefect._internal.concurrency.services")
    base = getattr(services, "_QueueServiceBase", None)
    if base is None:
        return True
    try:
        _, pending = base.drain_all(timeout=timeout)
    except Exception:  # a Prefect internal: fall back to the normal exit
        return True
    return not pending


def quick_exit(code: int | str | None) -> NoReturn:  # pragma: no cover - ends the process
    """End the process as a normal exit would, without tearing the interpreter down.

        Prefect's log and event queues are drained first, for at most :data:`EXIT_DRAIN_S`; then
        threads are joined and every exit handler runs, in the interpreter's own order; only the
        module teardown that follows is skipped: with Prefect, pandas and numba loaded it takes one
        to two seconds and changes nothing on disk or on the server. If the queues did not drain in
        time (the server stopped answering), the exit handlers run for at most as long again and the
    process ends with its exit status.
    """
    import atexit
    import threading

    from release_store.run.timing import mark, span

    if isinstance(code, str):
        sys.stderr.write(code + "\n")
        code = 1
    with span("exit:drain"):
        drained = _drain_prefect(EXIT_DRAIN_S)
    if drained:
        with span("exit:threads"):
            threading._shutdown()  # type: ignore[attr-defined]  # what Py_FinalizeEx calls first
        with span("exit:atexit"):  # what is left of Prefect's queues, other exit handlers
            atexit._run_exitfuncs()
    else:  # the thread shutdown would drain again without a bound: only the exit handlers, bounded
        handlers = threading.Thread(target=atexit._run_exitfuncs, daemon=True)
        handlers.start()
        handlers.join(EXIT_DRAIN_S)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    mark("exit:end")
    os._exit(code or 0)
