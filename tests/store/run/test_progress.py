"""Progress of a release: hooks are silent without a reporter; the rich display on stderr."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from sds_release.store.run import progress


class _Recorder:
    def __init__(self) -> None:
        self.events: list[tuple] = []

    def stage(self, text: str) -> None:
        self.events.append(("stage", text))

    def advance(self, done: int, total: int) -> None:
        self.events.append(("advance", done, total))


def test_hooks_reach_only_the_installed_reporter() -> None:
    """Hooks do nothing without a reporter; inside `reporting` they are forwarded, then reset."""
    progress.stage("ignored")
    rec = _Recorder()
    with progress.reporting(rec):
        progress.stage("synthesize")
        progress.advance(4096, 10_000)
    progress.advance(1, 2)
    assert rec.events == [("stage", "synthesize"), ("advance", 4096, 10_000)]
    assert progress._REPORTER is None


def test_rich_display_shows_stage_bar_and_counts() -> None:
    """The display names the release and stage and shows done/total of the countable stage."""
    buf = io.StringIO()
    console = Console(file=buf, width=120, force_terminal=True)
    shown = progress.RichProgress("release r1", console=console)
    with shown, progress.reporting(shown):
        progress.stage("aggregate-2 (DP combinations of length 2)")
        progress.advance(1, 3)
        shown._progress.refresh()
        progress.stage("synthesize (synthetic records)")
        progress.advance(8192, 10_000)
        shown._progress.refresh()
    out = buf.getvalue()
    assert "release r1: aggregate-2 (DP combinations of length 2)" in out and "1/3" in out
    assert "release r1: synthesize (synthetic records)" in out and "8,192/10,000" in out
    assert "━" in out  # the bar


def test_display_is_erased_and_silent_off_a_terminal() -> None:
    """Off a terminal nothing is drawn, so stderr keeps only the CLI's own lines."""
    buf = io.StringIO()
    shown = progress.RichProgress("release r1", console=Console(file=buf, force_terminal=False))
    with shown, progress.reporting(shown):
        progress.stage("synthesize")
        progress.advance(5, 10)
    assert buf.getvalue() == ""


def test_quiet_display_prints_nothing() -> None:
    """--quiet (disable=True) shows nothing at all."""
    buf = io.StringIO()
    shown = progress.RichProgress(
        "release r1", disable=True, console=Console(file=buf, force_terminal=True)
    )
    with shown, progress.reporting(shown):
        progress.stage("synthesize")
        progress.advance(5, 10)
    assert buf.getvalue() == ""


def test_also_reporting_fans_out_and_restores() -> None:
    """A second reporter receives the same events as the installed one, only inside the block."""
    first, second = _Recorder(), _Recorder()
    with progress.reporting(first):
        with progress.also_reporting(second):
            progress.stage("aggregate-1 (x)")
            progress.advance(1, 3)
        progress.advance(2, 3)
    assert second.events == [("stage", "aggregate-1 (x)"), ("advance", 1, 3)]
    assert first.events == [*second.events, ("advance", 2, 3)]
    with progress.also_reporting(second):  # nothing installed: the new reporter alone
        progress.advance(3, 3)
    assert second.events[-1] == ("advance", 3, 3) and progress._REPORTER is None


def test_progress_artifacts_only_for_long_stages(monkeypatch: pytest.MonkeyPatch) -> None:
    """Aggregation and synthesis get one artifact each, updated per whole percent; others none."""
    from sds_release.tasks import progress_artifacts as pa

    calls: list[tuple] = []
    monkeypatch.setattr(
        pa, "create_progress_artifact", lambda **kw: calls.append(("create", kw["key"])) or "id"
    )
    monkeypatch.setattr(pa, "update_progress_artifact", lambda i, p: calls.append(("update", p)))
    reporter = pa.ProgressArtifacts("tiny")
    reporter.min_interval_s = 0.0
    for text, steps in (
        ("validating the input", [(1, 2)]),
        ("aggregate-1 (DP combinations of length 1)", [(0, 2), (1, 2)]),
        ("aggregate-2 (DP combinations of length 2)", [(1, 2), (2, 2)]),
        ("synthesize (synthetic records)", [(1, 1000), (2, 1000), (10, 1000), (1000, 1000)]),
    ):
        reporter.stage(text)
        for done, total in steps:
            reporter.advance(done, total)
    assert calls == [
        ("create", "aggregate-progress-tiny"),
        ("update", 50.0),
        ("update", 100.0),
        ("create", "synthesize-progress-tiny"),
        ("update", 1.0),
        ("update", 100.0),
    ]


def test_progress_artifacts_updates_at_most_every_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    """Updates closer than ``min_interval_s`` are skipped, 100 % is always sent."""
    from sds_release.tasks import progress_artifacts as pa

    calls: list[tuple] = []
    monkeypatch.setattr(
        pa, "create_progress_artifact", lambda **kw: calls.append(("create", kw["key"])) or "id"
    )
    monkeypatch.setattr(pa, "update_progress_artifact", lambda i, p: calls.append(("update", p)))
    now = [0.0]
    reporter = pa.ProgressArtifacts("tiny", clock=lambda: now[0])
    reporter.stage("synthesize (synthetic records)")
    for done, at in ((1, 0.0), (2, 0.5), (3, 1.9), (4, 2.0), (5, 2.1), (99, 2.2), (100, 2.3)):
        now[0] = at
        reporter.advance(done, 100)
    assert calls == [
        ("create", "synthesize-progress-tiny"),
        ("update", 4.0),
        ("update", 100.0),
    ]


def test_warning_reaches_the_terminal_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stage's warning is printed once on stderr by the CLI's display, also with --quiet, in
    the CLI's own warning format; the Prefect artifacts reporter next to it drops it."""
    from sds_release.tasks import progress_artifacts as pa

    calls: list[str] = []
    monkeypatch.setattr(pa, "create_progress_artifact", lambda **kw: calls.append("create"))
    progress.warning("nobody listens")
    buf = io.StringIO()
    shown = progress.RichProgress(
        "release r1", disable=True, console=Console(file=buf, force_terminal=True)
    )
    with shown, progress.reporting(shown), progress.also_reporting(pa.ProgressArtifacts("t")):
        progress.warning('column sex (48% of rows)\n holds "0"')
    captured = capsys.readouterr()
    assert captured.err == 'sds: warning: column sex (48% of rows) holds "0"\n'
    assert captured.out == buf.getvalue() == "" and calls == []
