"""Test-only fault points of a running release: die (SIGKILL) or pause at a named moment.

The crash and fault tests (tests/e2e/) set one of two variables in the environment of a real
``sds release``; nothing happens without them. A *point* names a moment of the release:

- ``<stage>`` (e.g. ``aggregate-2``): the stage was charged and computed (its noise drawn),
  its checkpoint is not written yet;
- ``charge:<stage>``: right before the stage's charge is written to the ledger;
- ``publish``: right before the publish stage writes the first published file.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

__all__ = ["KILL_ENV", "PAUSE_ENV", "PAUSE_FILE", "fault_point"]

KILL_ENV = "SDS_TEST_KILL_AT"
"""A point at which the release SIGKILLs its own process (left as a crash leaves it)."""
PAUSE_ENV = "SDS_TEST_PAUSE_AT"
"""A point at which the release writes :data:`PAUSE_FILE` (the point's name) in its private
directory and waits until the file is removed: the test acts on the paused release (kills a
server, fills the disk, sends a signal) and lets it go on by removing the file."""
PAUSE_FILE = "test-paused"


def fault_point(point: str, private_dir: Path) -> None:
    """Die or pause here when the environment asks for ``point``; otherwise nothing."""
    if os.environ.get(KILL_ENV) == point:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get(PAUSE_ENV) == point:
        marker = Path(private_dir) / PAUSE_FILE
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # private/ is 0600
        with os.fdopen(fd, "w") as f:
            f.write(point)
        while marker.exists():
            time.sleep(0.05)
