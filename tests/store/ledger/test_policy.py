"""The per-release policy of a dataset: set with its budget, chained, shown, enforced at every
reservation (library, CLI pre-flight) with a refusal that says what the policy is and who set it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from sds_core.errors import SdsInputError
from sds_release.store.config import build_params
from sds_release.store.inputs.preflight import check_budget
from sds_release.store.ledger.book import Ledger
from sds_release.store.ledger.values import BudgetExceededError, PlannedCharge, PolicyExceededError
from tests.helpers import run_cli

PLAN = [PlannedCharge("count", "laplace", 0.5), PlannedCharge("k1", "laplace", 1.5)]


def test_policy_refuses_a_larger_release_and_names_who_set_it(ledger_url: str) -> None:
    """A release over the policy is refused at reservation, with the limit and its author;
    one within it is reserved; nothing is charged for the refused one."""
    led = Ledger.from_url(ledger_url)
    led.set_budget("pums", epsilon=20, delta=1e-5, max_epsilon_per_release=2, set_by="ana@host")
    with pytest.raises(PolicyExceededError, match=r"epsilon=4.*at most 2.*set by ana@host"):
        led.reserve("pums", "too-big", PLAN, epsilon=4.0, delta=1e-7)
    assert led.reservation("too-big") is None
    led.reserve("pums", "fits", PLAN, epsilon=2.0, delta=1e-7)
    status = led.budget("pums")
    assert status is not None and status.epsilon_reserved == 2.0
    assert status.policy is not None and status.policy.max_epsilon == 2


def test_delta_policy_and_refusal_is_a_budget_error(ledger_url: str) -> None:
    """The δ limit is enforced too; the refusal is a BudgetExceededError (exit 1 at the CLI)."""
    led = Ledger.from_url(ledger_url)
    led.set_budget("pums", epsilon=20, delta=1e-4, max_delta_per_release=1e-6)
    with pytest.raises(BudgetExceededError, match=r"delta=1e-05 \(at most 1e-06\)"):
        led.reserve("pums", "r1", PLAN, epsilon=2.0, delta=1e-5)


def test_raising_the_budget_keeps_the_policy_and_clear_removes_it(ledger_url: str) -> None:
    """A later `budget set` without limits keeps the policy; --clear-policy removes it."""
    led = Ledger.from_url(ledger_url)
    led.set_budget("pums", epsilon=10, delta=1e-5, max_epsilon_per_release=1)
    status = led.set_budget("pums", epsilon=30, delta=1e-5)
    assert status.policy is not None and status.policy.max_epsilon == 1
    status = led.set_budget("pums", epsilon=30, delta=1e-5, clear_policy=True)
    assert status.policy is None
    led.reserve("pums", "big", PLAN, epsilon=5.0, delta=1e-7)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_epsilon_per_release": 0.0}, "must be > 0"),
        ({"max_epsilon_per_release": 50.0}, "at most the lifetime budget"),
        ({"max_delta_per_release": 1e-3}, "at most the lifetime budget"),
        ({"max_epsilon_per_release": 1.0, "clear_policy": True}, "do not combine"),
    ],
)
def test_bad_policies_are_refused(tmp_path: Path, kwargs: dict, match: str) -> None:
    """A limit that is not > 0, above the lifetime budget, or combined with --clear-policy."""
    led = Ledger.from_url(f"sqlite:///{tmp_path / 'l.sqlite'}")
    with pytest.raises(SdsInputError, match=match):
        led.set_budget("pums", epsilon=10, delta=1e-5, **kwargs)
    assert led.budget("pums") is None


def test_policy_is_in_the_hash_chain(tmp_path: Path) -> None:
    """The policy is part of the chained budget row: editing it breaks `verify`."""
    path = tmp_path / "l.sqlite"
    led = Ledger.from_url(f"sqlite:///{path}")
    led.set_budget("pums", epsilon=10, delta=1e-5, max_epsilon_per_release=1)
    assert led.verify().ok
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TRIGGER ledger_no_update")
        detail = json.loads(conn.execute("SELECT detail FROM ledger").fetchone()[0])
        detail["policy"]["max_epsilon"] = 10
        conn.execute("UPDATE ledger SET detail = ?", (json.dumps(detail, sort_keys=True),))
    assert not Ledger.from_url(f"sqlite:///{path}").verify().ok


def test_preflight_refuses_over_the_policy_before_reading(tmp_path: Path) -> None:
    """The CLI's pre-flight applies the same policy before any data is read."""
    home = tmp_path / "home"
    home.mkdir()
    Ledger.open(home).set_budget("pums", epsilon=20, delta=1e-5, max_epsilon_per_release=2)
    params = build_params(
        {},
        {
            "input": str(tmp_path / "absent.csv"),
            "dataset": "pums",
            "home": str(home),
            "epsilon": 3.0,
        },
    )
    with pytest.raises(PolicyExceededError, match="per-release policy"):
        check_budget(params)


def test_budget_cli_sets_and_shows_the_policy(tmp_path: Path) -> None:
    """`sds budget set --max-epsilon-per-release` records it; `budget show --json` shows it."""
    home = str(tmp_path)
    code, out, err = run_cli(
        "budget",
        "set",
        "pums",
        "--epsilon",
        "20",
        "--max-epsilon-per-release",
        "2",
        "--home",
        home,
    )
    assert code == 0, err
    assert "policy ε ≤ 2 per release" in out
    code, out, _ = run_cli("budget", "show", "pums", "--json", "--home", home)
    [row] = json.loads(out)
    assert row["policy"]["max_epsilon"] == 2 and "@" in row["policy"]["set_by"]
    code, _, err = run_cli(
        "budget",
        "set",
        "pums",
        "--epsilon",
        "20",
        "--max-epsilon-per-release",
        "30",
        "--home",
        home,
    )
    assert code == 2 and "at most the lifetime budget" in err
