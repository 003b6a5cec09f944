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


def quick_exit(code: int | str | None) -> NoReturn:  # pragma: no cover - ends the process
    """End the process as a normal exit would, without tearing the interpreter down.

    Threads are joined and every exit handler runs first, in the interpreter's own order
    (Prefect drains its log and event queues to the server there); only the module teardown
    that follows is skipped: with Prefect, pandas and numba loaded it takes one to two seconds
    and changes nothing on disk or on the server.
    """
    import atexit
    import threading

    from release_store.run.timing import mark, span

    if isinstance(code, str):
        sys.stderr.write(code + "\n")
        code = 1
    with span("exit:threads"):
        threading._shutdown()  # type: ignore[attr-defined]  # what Py_FinalizeEx calls first
    with span("exit:atexit"):  # Prefect drains its log and event queues to the server here
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    mark("exit:end")
    os._exit(code or 0)
