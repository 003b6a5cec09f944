"""``sds cancel`` on the home's SQLite ledger, and ``sds resume`` of a cancelled release."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sds_release.store.ledger.book import Ledger
from sds_release.store.ledger.values import PlannedCharge
from tests.helpers import charges, complete_releases, run_cli

PLAN = [PlannedCharge("count", "laplace", 0.1), PlannedCharge("k1", "laplace", 0.2)]


def test_cancel_on_sqlite_keeps_the_spent_and_returns_the_rest(home: Path) -> None:
    """An abandoned reservation in the home's SQLite ledger: cancel keeps what its drawn stage
    spent, returns the rest (idempotent); an unknown id is refused with exit 2."""
    ledger = Ledger.open(home)
    ledger.set_budget("pums", epsilon=1.0, delta=1e-5)
    ledger.reserve("pums", "abandoned", PLAN)
    ledger.charge("abandoned", "count")
    code, out, err = run_cli("cancel", "abandoned", "--home", str(home))
    assert code == 0, err
    assert out == "cancelled abandoned: spent ε=0.1 δ=0, returned ε=0.2 δ=0\n"
    assert ledger.reservation("abandoned").status == "cancelled"
    status = ledger.budget("pums")
    assert (status.epsilon_spent, status.epsilon_reserved) == (0.1, 0.0)
    assert run_cli("cancel", "abandoned", "--home", str(home))[:2] == (0, out)  # again: same
    code, out, err = run_cli("cancel", "never-reserved", "--home", str(home))
    assert (code, out) == (2, "") and "'never-reserved' has no reservation in the ledger" in err
    assert ledger.verify().ok and [c.stage for c in ledger.charges()] == ["count"]


def test_a_cancelled_release_is_not_resumed(
    tiny_csv: Path,
    tiny_config: Path,
    home: Path,
    prefect_server: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A release that failed computing aggregate-2 (count, aggregate-1 and aggregate-2 charged:
    a stage is charged before it draws; its reservation stays open), then `sds cancel`:
    `sds resume` refuses it, naming why and the fix, and charges nothing more; no release
    directory looks complete."""
    from sds_core.marginals import engine

    real = engine.aggregate_length

    def fail_at_two(backend: Any, k: int, *args: Any, **kwargs: Any) -> Any:
        if k == 2:
            raise RuntimeError("injected failure in aggregate-2")
        return real(backend, k, *args, **kwargs)

    monkeypatch.setattr(engine, "aggregate_length", fail_at_two)
    args = ["--config", str(tiny_config), "--home", str(home), "--quiet", "--seed", "3"]
    code, _, err = run_cli("release", str(tiny_csv), *args, "--release-id", "stopped")
    assert code == 1 and "stopped" in err, err
    monkeypatch.setattr(engine, "aggregate_length", real)
    ledger = Ledger.open(home)
    assert ledger.reservation("stopped").status == "open"
    spent = [c.stage for c in charges(home)]
    assert spent == ["count", "aggregate-1", "aggregate-2"]

    code, out, err = run_cli("cancel", "stopped", "--home", str(home))
    assert code == 0 and out.startswith("cancelled stopped: spent ε="), err
    assert ledger.reservation("stopped").status == "cancelled"

    code, out, err = run_cli("resume", "stopped", "--home", str(home), "--quiet")
    assert code == 1 and out == ""
    said = " ".join(err.split())
    assert "release 'stopped' is closed: it was cancelled" in said
    assert "there is nothing to resume. Start a new release" in said
    assert [c.stage for c in charges(home)] == spent  # nothing charged by the refused resume
    assert ledger.reservation("stopped").status == "cancelled" and ledger.verify().ok
    assert complete_releases(home) == []
