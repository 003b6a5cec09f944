"""Prefect progress artifacts for the long stages of a release (aggregation, synthesis).

A :class:`sds_release.store.run.progress.Reporter` that the flow installs next to the CLI's display:
the first countable progress of a stage creates one progress artifact for it, later progress
updates it (at most every whole percent, and at most once every ``min_interval_s`` seconds
but for 100 %: each update is a round trip to the server, ~40 ms on a loaded machine, which a
1M-row synthesis made ~75 times). Only public or DP numbers reach it (lengths done of
R, synthetic records made of the DP target), as for every progress reporter.
"""

from __future__ import annotations

import time
from typing import Any, cast
from uuid import UUID

from prefect import get_run_logger
from prefect.artifacts import create_progress_artifact, update_progress_artifact

from sds_release.store.run import timing

LONG_STAGES = {"aggregate": "aggregation (lengths 1..R)", "synthesize": "synthetic records"}
"""Stage groups with a progress artifact, and what their progress counts."""


def stage_group(text: str) -> str:
    """The registry stage group of a progress text (``aggregate-2 (...)`` -> ``aggregate``).

    >>> stage_group("aggregate-2 (DP combinations of length 2)"), stage_group("synthesize (x)")
    ('aggregate', 'synthesize')
    """
    name = text.split(" ", 1)[0]
    head, _, tail = name.rpartition("-")
    return head if head and tail.isdigit() else name


class ProgressArtifacts:
    """One Prefect progress artifact per long stage, keyed ``<stage>-progress-<dataset key>``."""

    min_interval_s = 2.0
    """Seconds between two updates of a stage's artifact (100 % is always sent)."""

    def __init__(self, key_suffix: str, clock: Any = time.monotonic) -> None:
        """``key_suffix``: the dataset's artifact key (lowercase, digits, dashes)."""
        self.key_suffix = key_suffix
        self._clock = clock
        self._last: dict[str, float] = {}
        self._group: str | None = None
        self._ids: dict[str, UUID] = {}
        self._shown: dict[str, int] = {}
        self._failed = False

    def stage(self, text: str) -> None:
        """Remember which stage group the next progress belongs to."""
        self._group = stage_group(text)

    def warning(self, text: str) -> None:
        """Dropped: a warning may hold figures of the sensitive data (the custodian's terminal
        only), and artifacts are stored on the Prefect server."""

    def advance(self, done: int, total: int) -> None:
        """Create or update the stage's progress artifact (whole percents only)."""
        group = self._group
        if group not in LONG_STAGES or total <= 0 or self._failed:
            return
        percent = min(100, int(100 * done / total))
        if self._shown.get(group) == percent:
            return
        now = self._clock()
        if percent < 100 and now - self._last.get(group, -float("inf")) < self.min_interval_s:
            return
        self._shown[group], self._last[group] = percent, now
        try:
            with timing.span("progress-artifact"):
                if group not in self._ids:
                    created = create_progress_artifact(
                        progress=float(percent),
                        key=f"{group}-progress-{self.key_suffix}"[:100],
                        description=f"{group}: {LONG_STAGES[group]} done",
                    )
                    self._ids[group] = cast(UUID, created)  # sync context: a UUID
                else:
                    update_progress_artifact(self._ids[group], float(percent))
        except Exception as e:  # progress display only: never fail a release for it
            self._failed = True
            _warn(f"progress artifacts turned off: {type(e).__name__}: {e}")


def _warn(message: str) -> Any:
    get_run_logger().warning(message)
