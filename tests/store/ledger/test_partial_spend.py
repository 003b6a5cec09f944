"""What a failed release spent (``partial_spend``): each drawn stage composed as the plan's proof
composes it. The DP bins and the record count are pure ε-DP, the aggregate stages are zCDP
(converted to (ε, δ) once), and δ is spent only once a stage that carries one drew noise."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from sds_release.store.config import build_params
from sds_release.store.ledger.book import Ledger
from sds_release.store.ledger.values import PlannedCharge
from sds_release.store.run.release_run import planned_charges

EPSILON, DELTA = 2.0, 1e-6
SCHEMA = {
    "columns": [
        {"name": "age", "type": "integer", "min": 0, "max": 120, "bins": {"dp_quantiles": 5}},
        {"name": "sex"},
        {"name": "educ"},
    ]
}


def _plan() -> list[PlannedCharge]:
    """The reservation of an R = 3 release with DP bins on one column (ε 2, δ 1e-6)."""
    params = build_params(
        {
            "dataset": "people",
            "input": "people.csv",
            "epsilon": EPSILON,
            "delta": DELTA,
            "reporting_length": 3,
            "synthesis": "records",
            "use_columns": ["age", "sex", "educ"],
            "table_schema": SCHEMA,
        },
        {},
    )
    return planned_charges(params)


def _cancelled_after(tmp_path: Path, last: str) -> tuple[float, float]:
    """(ε, δ) kept by a release cancelled once every stage up to ``last`` was charged."""
    plan = _plan()
    ledger = Ledger.from_url(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    ledger.set_budget("people", epsilon=10.0, delta=1e-5)
    ledger.reserve("people", "r1", plan, epsilon=EPSILON, delta=DELTA)
    for stage in plan:
        ledger.charge("r1", stage.stage)
        if stage.stage == last:
            break
    result = ledger.cancel("r1")
    assert result.epsilon_spent + result.epsilon_returned == pytest.approx(EPSILON, rel=1e-12)
    return result.epsilon_spent, result.delta_spent


def test_the_plan_is_the_one_computed_by_hand() -> None:
    """The plan: binning ε_b = 5% of ε (pure, its ρ recorded, no δ), the count 0.5% of the rest
    (pure), aggregate-1..3 zCDP with all of δ."""
    plan = {p.stage: p for p in _plan()}
    assert list(plan) == ["binning", "count", "aggregate-1", "aggregate-2", "aggregate-3"]
    assert plan["binning"].epsilon == pytest.approx(0.1) and plan["binning"].delta == 0
    assert plan["binning"].rho == pytest.approx(4 * (0.1 / 4) ** 2 / 8)  # q − 1 selections
    assert plan["count"].epsilon == pytest.approx(0.005 * 1.9) and plan["count"].rho is None
    aggregates = [plan[f"aggregate-{k}"] for k in (1, 2, 3)]
    assert math.fsum(p.delta for p in aggregates) == pytest.approx(DELTA, rel=1e-12)


@pytest.mark.parametrize("last", ["binning", "count", "aggregate-2"])
def test_a_failed_release_spends_what_its_drawn_stages_compose_to(
    tmp_path: Path, last: str
) -> None:
    """Cancelled after binning: ε_b and no δ; after count: ε_b + ε_N and no δ; after aggregate-2:
    those plus ρ_1 + ρ_2 converted once at δ/2, and all of δ (aggregate-1 pays the threshold)."""
    plan = {p.stage: p for p in _plan()}
    eps_b, eps_n = plan["binning"].epsilon, plan["count"].epsilon
    rho = plan["aggregate-1"].rho + plan["aggregate-2"].rho  # type: ignore[operator]
    expected = {
        "binning": (eps_b, 0.0),
        "count": (eps_b + eps_n, 0.0),
        "aggregate-2": (
            eps_b + eps_n + rho + 2 * math.sqrt(rho * math.log(1 / (DELTA / 2))),
            DELTA,
        ),
    }[last]
    epsilon, delta = _cancelled_after(tmp_path, last)
    assert epsilon == pytest.approx(expected[0], rel=1e-12)
    assert delta == pytest.approx(expected[1], rel=1e-12, abs=0.0)
