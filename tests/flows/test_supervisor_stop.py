"""How a home's supervisor stops (``sds server stop``): it looks whether it was told to stop
between its rounds, not once a round (2 s), and sends SIGTERM to its children together before
waiting for them (``sds server stop`` took 3.7-4.0 s, now 0.6-0.8 s: docs/development.md)."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from sds_release.flows.local import supervisor


def test_a_nap_ends_once_the_supervisor_is_told_to_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    """A round's wait sleeps in steps of at most ``_NAP_S`` and ends at the first step after
    the SIGTERM handler set the flag (the clock is frozen here: only the flag ends it)."""
    slept: list[float] = []
    monkeypatch.setattr(supervisor.time, "sleep", slept.append)
    asked = iter([False, False, True])
    supervisor._nap(3600.0, lambda: next(asked))
    assert slept == [supervisor._NAP_S, supervisor._NAP_S]


class _Child:
    """A stand-in for a child process that records what is done to it."""

    def __init__(self, name: str, calls: list[str], *, alive: bool = True) -> None:
        self.name, self.calls, self.alive = name, calls, alive

    def poll(self) -> int | None:
        return None if self.alive else 0

    def terminate(self) -> None:
        self.calls.append(f"terminate {self.name}")

    def wait(self, timeout: float | None = None) -> int:
        self.calls.append(f"wait {self.name}")
        return 0

    def kill(self) -> None:  # pragma: no cover - only after a wait times out
        self.calls.append(f"kill {self.name}")


def test_children_are_all_told_to_stop_before_any_is_waited_for() -> None:
    """SIGTERM to every live child first, then the waits: their shutdowns overlap; a child
    that already ended or was never started is left alone."""
    calls: list[str] = []
    children: list[Any] = [
        _Child("builder", calls),
        None,
        _Child("ended", calls, alive=False),
        _Child("runner", calls),
    ]
    supervisor._stop_children(*children)
    assert calls == ["terminate builder", "terminate runner", "wait builder", "wait runner"]


def test_a_child_that_ignores_sigterm_is_killed() -> None:
    """A child still alive 30 s after its SIGTERM is killed (the wait's timeout)."""
    calls: list[str] = []

    class Stuck(_Child):
        def wait(self, timeout: float | None = None) -> int:
            self.calls.append(f"wait {self.name}")
            if timeout is not None:
                raise subprocess.TimeoutExpired("stuck", timeout)
            return -9

        def kill(self) -> None:
            self.calls.append(f"kill {self.name}")

    supervisor._stop_children(Stuck("server", calls))  # type: ignore[arg-type]
    assert calls == ["terminate server", "wait server", "kill server", "wait server"]
