"""Benchmark-only timing marks of one ``sds release``: client, warm runner child, flow.

``bench/bench_release.py`` sets :data:`TIMING_ENV` to a file; every process of the release then
appends one JSON line per mark or span to it: its name, the wall clock (``time.time()``, so the
client's, the child's and Prefect's times compare) and the process id. Nothing but names and
times is written (no data, no counts, no parameters); without the variable nothing happens.
Only the standard library is imported here (the client imports this before anything else).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["TIMING_ENV", "mark", "span"]

TIMING_ENV = "SDS_TIMING_FILE"
"""The file the marks are appended to (JSON lines); unset (the default): no marks."""


def _write(record: dict[str, object]) -> None:
    path = os.environ.get(TIMING_ENV)
    if not path:
        return
    line = json.dumps({**record, "pid": os.getpid()}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())  # one short O_APPEND write: lines of processes never mix
    finally:
        os.close(fd)


def mark(name: str, **extra: str | float) -> None:
    """Record that this process reached the point ``name`` now (``extra``: ids or seconds)."""
    _write({"mark": name, "t": time.time(), **extra})


@contextmanager
def span(name: str) -> Iterator[None]:
    """Record the start and end of the block as one line (``t0``, ``t1``), also when it raises."""
    if not os.environ.get(TIMING_ENV):
        yield
        return
    t0 = time.time()
    try:
        yield
    finally:
        _write({"span": name, "t0": t0, "t1": time.time()})
