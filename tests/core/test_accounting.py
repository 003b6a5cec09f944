"""Tests for sds_core.dp.accounting: budget split, reference formulas, CKS20 conversion."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sds_core.dp.accounting import (
    default_delta,
    epsilon_to_zcdp,
    plan_budget,
    zcdp_to_epsilon,
)
from sds_core.errors import SdsInputError

REF = {
    "epsilon": 4.0,
    "delta": 1.8929e-5,
    "reporting_length": 4,
    "percentile_epsilon_proportion": 0.01,
    "number_of_records_epsilon_proportion": 0.005,
    "sigma_proportions": [1, 1 / 2, 1 / 3, 1 / 4],
}


def test_reference_reproduces_pac_synth_numbers() -> None:
    """Reference accounting gives pac-synth's ρ, ε_Q and σ_k for the spec §1.4 example."""
    plan = plan_budget(**REF, accounting="reference")
    assert plan.epsilon_records == pytest.approx(0.02)
    assert plan.epsilon_marginals == pytest.approx(3.98)
    assert plan.rho == pytest.approx(0.29366, rel=1e-4)
    assert plan.epsilon_percentile == pytest.approx(0.038320, abs=5e-7)
    assert plan.sigma_by_len == pytest.approx([7.1828, 3.5914, 2.3943, 1.7957], abs=5e-5)
    assert plan.rho_percentile == pytest.approx(plan.epsilon_percentile**2 / 2)


def test_default_delta_matches_spec_example() -> None:
    """δ = 1/(ln m · m) gives 1.8929e-5 at m = 6065; m <= 1 raises."""
    assert default_delta(6065) == pytest.approx(1.8929e-5, rel=1e-4)
    with pytest.raises(SdsInputError, match="protected_number_of_records"):
        default_delta(1)


def test_tight_gives_more_rho_and_less_noise() -> None:
    """Tight accounting: CKS20 ρ at δ/2 > reference ρ, σ smaller, percentile charged ε_Q²/8."""
    ref = plan_budget(**REF, accounting="reference")
    tight = plan_budget(**REF)
    assert tight.accounting == "tight"
    assert tight.rho > ref.rho * 1.2
    assert all(t < r for t, r in zip(tight.sigma_by_len, ref.sigma_by_len, strict=True))
    assert tight.rho_percentile == pytest.approx(tight.epsilon_percentile**2 / 8)
    assert zcdp_to_epsilon(tight.rho, REF["delta"] / 2) == pytest.approx(3.98, abs=1e-6)
    assert zcdp_to_epsilon(tight.rho, REF["delta"] / 2) <= 3.98


@settings(max_examples=60, deadline=None)
@given(
    eps=st.floats(0.05, 20),
    log_delta=st.floats(-12, -2),
    r=st.integers(1, 6),
    q_p=st.floats(0.001, 0.9),
    n_p=st.floats(0.001, 0.9),
    props=st.lists(st.floats(0.05, 5), min_size=6, max_size=6),
    acc=st.sampled_from(["reference", "tight"]),
)
def test_zcdp_equation_holds(
    eps: float, log_delta: float, r: int, q_p: float, n_p: float, props: list[float], acc: str
) -> None:
    """R·ρ_Q + ½Σ1/σ_k² == ρ, ρ_k sum to ρ, and stage spends sum exactly to (ε, δ)."""
    delta = 10.0**log_delta
    plan = plan_budget(
        epsilon=eps,
        delta=delta,
        reporting_length=r,
        percentile_epsilon_proportion=q_p,
        number_of_records_epsilon_proportion=n_p,
        sigma_proportions=props[:r],
        accounting=acc,  # type: ignore[arg-type]
    )
    lhs = r * plan.rho_percentile + 0.5 * math.fsum(1 / s**2 for s in plan.sigma_by_len)
    assert lhs == pytest.approx(plan.rho, rel=1e-9)
    assert math.fsum(plan.rho_by_len) == pytest.approx(plan.rho, rel=1e-9)
    factor = 2 if acc == "reference" else 8
    assert r * plan.epsilon_percentile**2 / factor == pytest.approx(q_p * plan.rho, rel=1e-9)
    method = "bs16" if acc == "reference" else "cks"
    assert zcdp_to_epsilon(plan.rho, delta / 2, method) <= plan.epsilon_marginals * (1 + 1e-9)
    spends = plan.stage_spends()
    assert math.fsum(s.epsilon for s in spends) == eps
    assert math.fsum(s.delta for s in spends) == delta
    assert [s.stage for s in spends] == ["count"] + [f"aggregate-{k}" for k in range(1, r + 1)]
    assert all(s.epsilon > 0 and s.delta >= 0 for s in spends)


def test_stage_spends_apportioning() -> None:
    """Count gets (ε_N, 0, None); lengths get ε_M·ρ_k/ρ; length 1 carries the extra δ/2."""
    plan = plan_budget(**REF)
    spends = plan.stage_spends()
    assert (spends[0].stage, spends[0].mechanism, spends[0].delta, spends[0].rho) == (
        "count",
        "discrete-laplace",
        0.0,
        None,
    )
    assert spends[0].epsilon == pytest.approx(0.02)
    assert spends[2].epsilon == pytest.approx(3.98 * plan.rho_by_len[1] / plan.rho)
    assert spends[1].delta > REF["delta"] / 2
    assert spends[3].rho == plan.rho_by_len[2]


@pytest.mark.parametrize(
    ("rho", "delta", "expected"), [(0.005, 1e-6, 0.430), (0.05, 1e-6, 1.472), (0.5, 1e-6, 5.222)]
)
def test_cks_matches_published_table(rho: float, delta: float, expected: float) -> None:
    """CKS20 ε at δ = 1e-6 matches the dp-assurance.md table (and beats BS16)."""
    assert zcdp_to_epsilon(rho, delta) == pytest.approx(expected, abs=1e-3)
    assert zcdp_to_epsilon(rho, delta, "bs16") > zcdp_to_epsilon(rho, delta)


@pytest.mark.parametrize("method", ["bs16", "cks"])
@pytest.mark.parametrize(("eps", "delta"), [(0.3, 1e-7), (1.0, 1e-6), (4.0, 1e-5), (12.0, 1e-9)])
def test_inversion_round_trips(method: str, eps: float, delta: float) -> None:
    """epsilon_to_zcdp inverts zcdp_to_epsilon and never overshoots ε."""
    rho = epsilon_to_zcdp(eps, delta, method)
    back = zcdp_to_epsilon(rho, delta, method)
    assert back == pytest.approx(eps, rel=1e-7)
    assert back <= eps * (1 + 1e-12)


@pytest.mark.parametrize(
    ("rho", "delta"), [(0.01, 1e-6), (0.1, 1e-5), (0.3, 1e-6), (1.0, 1e-8), (3.0, 1e-4)]
)
def test_cks_agrees_with_dp_accounting(rho: float, delta: float) -> None:
    """Our CKS20 conversion agrees with dp_accounting's RDP accountant on a ZCDpEvent."""
    dp_accounting = pytest.importorskip("dp_accounting")
    acc = dp_accounting.rdp.RdpAccountant(orders=list(np.linspace(1.01, 400, 6000)))
    acc.compose(dp_accounting.ZCDpEvent(rho))
    theirs = acc.get_epsilon(delta)
    ours = zcdp_to_epsilon(rho, delta)
    assert ours <= theirs + 1e-9  # our optimum over α is at least as good as their grid
    assert ours == pytest.approx(theirs, rel=2e-3)


def test_composition_agrees_with_dp_accounting() -> None:
    """Composing the plan's per-length zCDP events in dp_accounting gives our ε_M at δ/2."""
    dp_accounting = pytest.importorskip("dp_accounting")
    plan = plan_budget(**REF)
    acc = dp_accounting.rdp.RdpAccountant(orders=list(np.linspace(1.01, 400, 6000)))
    for k in range(len(plan.sigma_by_len)):
        acc.compose(dp_accounting.ZCDpEvent(1 / (2 * plan.sigma_by_len[k] ** 2)))
        acc.compose(dp_accounting.ZCDpEvent(plan.rho_percentile))
    assert acc.get_epsilon(REF["delta"] / 2) == pytest.approx(plan.epsilon_marginals, rel=2e-3)


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ({"epsilon": 0}, "epsilon must be > 0"),
        ({"epsilon": -1.0}, "epsilon must be > 0"),
        ({"epsilon": math.inf}, "epsilon must be a finite"),
        ({"epsilon": math.nan}, "epsilon must be a finite"),
        ({"delta": 0.0}, "delta must be in the open interval"),
        ({"delta": 1.0}, "delta must be in the open interval"),
        ({"percentile_epsilon_proportion": 0.0}, "percentile_epsilon_proportion"),
        ({"percentile_epsilon_proportion": 1.0}, "percentile_epsilon_proportion"),
        ({"number_of_records_epsilon_proportion": 0.0}, "number_of_records_epsilon_proportion"),
        ({"number_of_records_epsilon_proportion": 1.5}, "number_of_records_epsilon_proportion"),
        ({"sigma_proportions": [1, 1, 1]}, "one entry per length"),
        ({"sigma_proportions": [1, 0, 1, 1]}, r"sigma_proportions\[1\] \(length 2\) must be > 0"),
        ({"sigma_proportions": [1, -2, 1, 1]}, "must be > 0"),
        ({"reporting_length": 0}, "reporting_length must be an integer >= 1"),
        ({"accounting": "loose"}, "accounting must be one of"),
    ],
)
def test_bad_parameters_raise(override: dict[str, object], match: str) -> None:
    """Invalid budget parameters raise SdsInputError naming the parameter and the rule."""
    with pytest.raises(SdsInputError, match=match):
        plan_budget(**{**REF, **override})  # type: ignore[arg-type]


def test_bad_conversion_inputs_raise() -> None:
    """Conversions reject ρ <= 0, δ outside (0,1) and unknown methods."""
    with pytest.raises(SdsInputError, match="rho must be > 0"):
        zcdp_to_epsilon(0.0, 1e-6)
    with pytest.raises(SdsInputError, match="delta must be in the open interval"):
        epsilon_to_zcdp(1.0, 1.0)
    with pytest.raises(SdsInputError, match="conversion method"):
        zcdp_to_epsilon(0.1, 1e-6, "rdp")
