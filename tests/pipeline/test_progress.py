"""Progress of a release: hooks are silent without a reporter; the rich display on stderr."""

from __future__ import annotations

import io

from rich.console import Console

from release_store import progress


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
