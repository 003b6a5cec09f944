"""Progress of a running release: hooks the stages call, and the CLI's rich display on stderr.

Stages call :func:`stage` when they start and :func:`advance` for countable work (aggregation
lengths k of R, synthetic records made of the target); both do nothing unless a reporter is
installed with :func:`reporting`. Only public or DP numbers may pass through those, never a
count of the sensitive data. :func:`warning` is the one exception, for the custodian's terminal
only: a warning the CLI's pre-flight would have printed before the run (the "0" cells and their
shares, found on the workers with the Dask executor); reporters that leave the terminal (the
flow's Prefect artifacts) drop it. No Prefect import (the CLI's ``--help`` stays fast).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol


class Reporter(Protocol):
    """Receives progress: a stage's description, then countable work within it."""

    def stage(self, text: str) -> None:
        """A new stage started (``text`` names it; no data values)."""

    def advance(self, done: int, total: int) -> None:
        """``done`` of ``total`` units of the current stage are finished (DP/public numbers)."""

    def warning(self, text: str) -> None:
        """A warning for the custodian's terminal (may hold figures of the sensitive data):
        shown there, or dropped by a reporter whose output leaves the terminal."""


_REPORTER: Reporter | None = None


@contextmanager
def reporting(reporter: Reporter | None) -> Iterator[None]:
    """Send the progress of the stages run inside the ``with`` block to ``reporter``."""
    global _REPORTER
    previous, _REPORTER = _REPORTER, reporter
    try:
        yield
    finally:
        _REPORTER = previous


class _Both:
    """Sends every report to two reporters, in order."""

    def __init__(self, first: Reporter, second: Reporter) -> None:
        self.first, self.second = first, second

    def stage(self, text: str) -> None:
        self.first.stage(text)
        self.second.stage(text)

    def advance(self, done: int, total: int) -> None:
        self.first.advance(done, total)
        self.second.advance(done, total)

    def warning(self, text: str) -> None:
        self.first.warning(text)
        self.second.warning(text)


@contextmanager
def also_reporting(reporter: Reporter) -> Iterator[None]:
    """Inside the ``with`` block, send progress to ``reporter`` as well as the current one."""
    with reporting(reporter if _REPORTER is None else _Both(_REPORTER, reporter)):
        yield


def stage(text: str) -> None:
    """Report that a stage started."""
    if _REPORTER is not None:
        _REPORTER.stage(text)


def advance(done: int, total: int) -> None:
    """Report countable progress of the current stage (e.g. synthetic records of the target)."""
    if _REPORTER is not None:
        _REPORTER.advance(int(done), int(total))


def warning(text: str) -> None:
    """Show a warning on the custodian's terminal (the CLI's stderr), once: the reporter decides
    (the terminal display prints it; reporters that leave the terminal drop it)."""
    if _REPORTER is not None:
        _REPORTER.warning(text)


def warning_line(text: str) -> str:
    """A warning as the CLI prints it on stderr: one paragraph after ``sds: warning:``.

    >>> warning_line("column x   holds  zeros")
    'sds: warning: column x holds zeros'
    """
    return f"sds: warning: {' '.join(str(text).split())}"


class RichProgress:
    """A one-line rich display on stderr: spinner, stage, bar with done/total, elapsed time.

    Stages without countable work show a pulsing bar and no numbers. The line is erased when
    the run ends (so a failure leaves only its one-paragraph message) and is drawn only on a
    terminal; ``disable=True`` (the CLI's ``--quiet``) draws nothing. Use as a context manager
    around the flow run.
    """

    def __init__(self, prefix: str, *, disable: bool = False, console: Any = None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.prefix = prefix
        console = console or Console(stderr=True)
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[count]}"),
            TimeElapsedColumn(),
            console=console,
            disable=disable or not console.is_terminal,
            transient=True,
        )
        self._task = self._progress.add_task(f"{prefix}: starting", total=None, count="")

    def __enter__(self) -> RichProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def stage(self, text: str) -> None:
        """Show a new stage (indeterminate until :meth:`advance` is called)."""
        self._progress.update(
            self._task, description=f"{self.prefix}: {text}", total=None, completed=0, count=""
        )

    def advance(self, done: int, total: int) -> None:
        """Fill the bar to ``done`` of ``total`` and show both numbers."""
        self._progress.update(
            self._task, total=max(total, 1), completed=min(done, total), count=f"{done:,}/{total:,}"
        )

    def warning(self, text: str) -> None:
        """Print the warning on stderr as the CLI's own warnings, also with ``--quiet`` (while
        the bar is drawn, rich's stderr redirection prints it above the bar)."""
        print(warning_line(text), file=sys.stderr, flush=True)
