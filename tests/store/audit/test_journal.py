"""The run journal: one private line per run start or refusal, read back in order; a torn line
is skipped; each origin reads as a phrase naming the command line, the deployment, the schedule."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from sds_release.store.audit.journal import (
    RunOrigin,
    journal_path,
    note_refusal,
    note_start,
    read_journal,
)


def test_starts_and_refusals_read_back_in_order(home: Path) -> None:
    """Entries come back as written; the journal and its folders are private (0600/0700); a
    line cut short by a crash is skipped, the next still reads."""
    home.mkdir()
    cli = RunOrigin("cli", flow_run_id="f1", user="ann@box")
    assert note_start(home, "r1", "d", None, cli)
    path = journal_path(home)
    with open(path, "a") as f:
        f.write('{"event": "start", "at"')  # a torn line, as a crash mid-write could leave
        f.write("\n")
    assert note_refusal(
        home, "r2", "d", "2026-10", cli, epsilon=2.0, delta=1e-6, reason="only ε 0 left"
    )
    got = read_journal(home)
    assert [(e.event, e.release_id, e.period) for e in got] == [
        ("start", "r1", None),
        ("refused", "r2", "2026-10"),
    ]
    assert got[0].origin == cli and got[1].epsilon == 2.0 and got[1].reason == "only ε 0 left"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.parent.parent.stat().st_mode) == 0o700


def test_a_journal_that_cannot_be_written_does_not_stop_a_release(home: Path) -> None:
    """Writing into a home whose private area is a file fails quietly (False): the journal is a
    record, not a gate."""
    home.mkdir()
    (home / "private").write_text("not a folder")
    assert note_start(home, "r1", "d", None, RunOrigin("cli")) is False
    assert read_journal(home) == []


@pytest.mark.parametrize(
    ("origin", "text"),
    [
        (RunOrigin("cli", user="ann@box"), "command line (ann@box)"),
        (
            RunOrigin("scheduled", deployment="scheduled-d", schedule="cron 0 2 1 * * (UTC)"),
            "deployment scheduled-d, on its schedule (cron 0 2 1 * * (UTC))",
        ),
        (
            RunOrigin("on-demand", deployment="on-demand-d"),
            "deployment on-demand-d, run on demand (Prefect UI or API)",
        ),
    ],
)
def test_an_origin_reads_as_who_started_the_run(origin: RunOrigin, text: str) -> None:
    """The command line names the user; a deployment its name and, scheduled, its schedule."""
    assert origin.describe() == text
