"""What ``sds`` prints and how it ends: one-paragraph errors, warnings, tables that fit any width,
the quick exit.

Used by the command line (:mod:`sds_release.flows.cli`) and by the release it launches
(:mod:`sds_release.flows.local.launch`), in-process or in a child of the warm runner, so a failure
reads the same wherever the release ran.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, NoReturn

import typer

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = ["fail", "plain_table", "print_table", "quick_exit", "stdout_console", "warn"]


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print one paragraph to stderr; return the Exit to raise."""
    typer.echo(f"sds: error: {' '.join(str(message).split())}", err=True)
    return typer.Exit(code)


def warn(message: str) -> None:
    """Print one warning paragraph to stderr (shown with --quiet too)."""
    from sds_release.store.run.progress import warning_line

    typer.echo(warning_line(message), err=True)


def stdout_console() -> Console:
    """The console a command prints its tables and notes on (stdout).

    On a terminal rich lays everything out at the terminal's width. In a pipe or a log, whatever
    COLUMNS says, no line is wrapped: a long note stays one line for ``grep``. (rich's own
    switches, e.g. ``TTY_COMPATIBLE=1``, make a pipe count as a terminal.)
    """
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console.soft_wrap = True
    return console


def print_table(console: Console, table: Table) -> None:
    """``table`` on ``console``: rich's boxed table on a terminal; in a pipe or a log,
    :func:`plain_table` (full column names, one row per line), then a blank line and the
    caption."""
    if console.is_terminal:
        console.print(table)
        return
    lines = plain_table(table)
    if table.caption:
        lines += ["", _plain(table.caption)]
    for line in lines:
        console.print(line, soft_wrap=True, markup=False, highlight=False, emoji=False)


def plain_table(table: Table) -> list[str]:
    """The header and the rows of ``table`` as lines of text, columns aligned by two spaces:
    no box, no colour, no cell cut or wrapped (a newline in a cell becomes a space)."""
    from rich.cells import cell_len

    columns = [[_plain(c.header), *map(_plain, c.cells)] for c in table.columns]
    widths = [max(map(cell_len, cells)) for cells in columns]
    right = [c.justify == "right" for c in table.columns]
    lines = []
    for row in zip(*columns, strict=True):
        cells = [
            " " * (w - cell_len(v)) + v if r else v + " " * (w - cell_len(v))
            for v, w, r in zip(row, widths, right, strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


def _plain(cell: object) -> str:
    """The text of one table cell (rich markup read as rich would, then dropped), on one line."""
    from rich.text import Text

    if isinstance(cell, str):
        cell = Text.from_markup(cell)
    text = cell.plain if isinstance(cell, Text) else str(cell)
    return " ".join(text.splitlines())


EXIT_DRAIN_S = 15.0
"""How long the end of the process waits for Prefect's log and event queues to reach the
server. It takes milliseconds when the server answers. A server that stopped answering made the
exit wait for each queued batch's requests in turn (~2 minutes measured after a complete release
whose server was killed, its port still held): beyond this the rest is dropped, and the release
has already said that the server missed its end."""


def freeze_heap_at_exit() -> None:
    """At this process's exit, move every object out of the cyclic collector's reach before the
    interpreter tears itself down (its exit handlers all run first).

    For the long-lived processes (the release runner, the home's Prefect server, the test
    processes): with Prefect, pandas and numba loaded, that teardown spent 1-1.5 s of CPU
    collecting the whole heap (2.6-2.8 s in a test process), and ``sds server stop`` (the test
    run) waited for it. What is left is freed with the process.
    """
    import atexit
    import gc

    atexit.register(gc.freeze)


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

    from sds_release.store.run.timing import mark, span

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
