"""The home's run journal: who or what started each release run, and the refused releases.

One JSON line per event in ``$SDS_HOME/private/_audit/runs.jsonl`` (0600, private: it names
runs, deployments and users): ``start`` when a run of a release has its reservation (a
resumed release has one line per run), ``refused`` when the budget refused a release before
anything was reserved or read (such a release leaves nothing in the ledger). Written by the
flows and the command line; read by the audit page (:mod:`sds_release.store.audit.trail`). A line
is appended in one write, so concurrent runs never interleave; a line that cannot be read is
skipped.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sds_release.store.config.release_params import ReleaseParams
from sds_release.store.workspace.home import resolve_home, utc_now

__all__ = [
    "AUDIT_DIR",
    "JOURNAL",
    "JournalEntry",
    "RunOrigin",
    "journal_path",
    "note_refusal",
    "note_refused",
    "note_start",
    "read_journal",
    "user_at_host",
]

AUDIT_DIR = "_audit"
"""Under ``$SDS_HOME/private/``; not a valid release id (ids start with a letter or digit)."""
JOURNAL = "runs.jsonl"


def user_at_host() -> str:
    """``user@host`` of this process (who ran a command-line release)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid {os.getuid()}"
    return f"{user}@{socket.gethostname()}"


@dataclass(frozen=True, slots=True)
class RunOrigin:
    """Who or what started a run.

    Attributes:
        kind: ``cli`` (the command line, or the release flow called directly), ``scheduled``
            (a deployment's schedule) or ``on-demand`` (a run of a deployment from the Prefect
            UI or API).
        deployment: the deployment's name (``scheduled`` and ``on-demand``).
        schedule: the deployment's schedule(s), e.g. ``cron 0 2 1 * * (UTC)`` (``scheduled``).
        flow_run_id: the Prefect flow run (None: no flow run, e.g. a pre-flight refusal).
        flow_run_name: its name.
        user: ``user@host`` of the process that ran it.
    """

    kind: str
    deployment: str | None = None
    schedule: str | None = None
    flow_run_id: str | None = None
    flow_run_name: str | None = None
    user: str | None = None

    def describe(self) -> str:
        """One phrase for a person: ``deployment scheduled-pums on its schedule (cron ...)``."""
        if self.kind == "scheduled":
            when = f" ({self.schedule})" if self.schedule else ""
            return f"deployment {self.deployment}, on its schedule{when}"
        if self.kind == "on-demand":
            return f"deployment {self.deployment}, run on demand (Prefect UI or API)"
        if self.kind == "cli":
            return "command line" + (f" ({self.user})" if self.user else "")
        return self.kind

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunOrigin:
        """Read back :func:`dataclasses.asdict` (unknown keys ignored)."""

        def text(key: str) -> str | None:
            value = data.get(key)
            return None if value is None else str(value)

        return cls(
            kind=str(data.get("kind") or "unknown"),
            deployment=text("deployment"),
            schedule=text("schedule"),
            flow_run_id=text("flow_run_id"),
            flow_run_name=text("flow_run_name"),
            user=text("user"),
        )


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One event of the journal (see the module docstring)."""

    event: str  # start | refused
    at: str
    release_id: str
    dataset: str
    period: str | None
    origin: RunOrigin
    epsilon: float | None = None  # refused: what the release asked for
    delta: float | None = None
    reason: str | None = None  # refused: the refusal's message


def journal_path(home: str | Path) -> Path:
    """``$SDS_HOME/private/_audit/runs.jsonl``."""
    return Path(home) / "private" / AUDIT_DIR / JOURNAL


def _append(home: str | Path, entry: JournalEntry) -> bool:
    """Append ``entry`` as one line (one ``write``); False when the journal cannot be written
    (the release goes on: the journal is a record, not a gate)."""
    path = journal_path(home)
    line = (json.dumps(asdict(entry), sort_keys=True, default=str) + "\n").encode("utf-8")
    try:
        for d in (path.parent.parent, path.parent):
            d.mkdir(exist_ok=True)
            os.chmod(d, 0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError:
        return False
    return True


def note_start(
    home: str | Path, release_id: str, dataset: str, period: str | None, origin: RunOrigin
) -> bool:
    """Record that a run of ``release_id`` started (its reservation is made or found)."""
    return _append(home, JournalEntry("start", utc_now(), release_id, dataset, period, origin))


def note_refusal(
    home: str | Path,
    release_id: str,
    dataset: str,
    period: str | None,
    origin: RunOrigin,
    *,
    epsilon: float | None,
    delta: float | None,
    reason: str,
) -> bool:
    """Record that the budget refused ``release_id`` before anything was reserved or read."""
    entry = JournalEntry(
        "refused",
        utc_now(),
        release_id,
        dataset,
        period,
        origin,
        epsilon=epsilon,
        delta=delta,
        reason=reason,
    )
    return _append(home, entry)


def note_refused(params: ReleaseParams, origin: RunOrigin, error: BaseException) -> bool:
    """:func:`note_refusal` of the release ``params`` describe, refused with ``error`` (a release
    refused before it was given an id is recorded as ``(no id yet)``)."""
    try:
        home = resolve_home(params.home)
        delta = params.resolved_delta()
    except Exception:  # the refusal itself is what the caller reports
        return False
    return note_refusal(
        home,
        params.release_id or "(no id yet)",
        str(params.dataset),
        params.period,
        origin,
        epsilon=params.epsilon,
        delta=delta,
        reason=str(error),
    )


def read_journal(home: str | Path) -> list[JournalEntry]:
    """Every readable entry, in the order written (none when there is no journal)."""
    path = journal_path(home)
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            data = json.loads(line)
            out.append(
                JournalEntry(
                    event=str(data["event"]),
                    at=str(data["at"]),
                    release_id=str(data["release_id"]),
                    dataset=str(data["dataset"]),
                    period=data.get("period"),
                    origin=RunOrigin.from_dict(data.get("origin") or {}),
                    epsilon=data.get("epsilon"),
                    delta=data.get("delta"),
                    reason=data.get("reason"),
                )
            )
        except (ValueError, KeyError, TypeError):
            continue  # a torn or foreign line: skipped, the rest still reads
    return out
