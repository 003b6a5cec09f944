"""sds_core.marginals.forecast: a release's noise before any data is read."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from sds_core.data.params import PrepareParams
from sds_core.data.preparation import prepare
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError
from sds_core.marginals.engine import dp_aggregate, plan_release
from sds_core.marginals.forecast import forecast, solve_epsilon
from sds_core.marginals.params import DpParams
from sds_core.marginals.privacy_report import noise_description


def test_forecast_equals_the_release_for_the_same_delta_k() -> None:
    """Given the Δ_k a real release chose, the forecast is that release's noise description:
    the same σ_k, noise sd and thresholds (one set of functions computes both)."""
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({c: rng.choice(list("abcd"), 400) for c in "pqrst"})
    params = DpParams(epsilon=2.0, delta=1e-5, reporting_length=3)
    table = prepare(frame, PrepareParams())
    done = dp_aggregate(table, params, ReleaseRandomness.from_seed(7))
    chosen = tuple(int(a) for a in done.report.allowed_sensitivity_by_len)
    released = noise_description(
        plan_release(params, 1), chosen, [float(t) for t in done.report.threshold_by_len]
    )
    assert [x["sigma"] for x in released["by_length"]] == list(done.report.sigma_by_len)
    planned = forecast(params, 5, allowed_by_len=chosen)
    for got, want in zip(planned.lengths, released["by_length"], strict=True):
        assert got.allowed == want["allowed_sensitivity"]
        assert got.noise_sd == pytest.approx(want["noise_sd"], rel=1e-12)
        assert got.threshold == pytest.approx(want["threshold"], rel=1e-12)
    assert planned.record_count_noise_sd == pytest.approx(
        released["record_count"]["noise_sd"], rel=1e-12
    )


def test_likely_delta_k_is_the_full_record_and_the_cap() -> None:
    """Δ_k likely = C(d, k) (or C(non-empty, k)), never above sensitivity_cap."""
    f = forecast(DpParams(epsilon=4, delta=1e-6, reporting_length=3), 6, n_nonempty=4)
    assert [x.allowed for x in f.lengths] == [4, 6, 4]
    assert [x.allowed_range for x in f.lengths] == [(0, 6), (0, 15), (0, 20)]
    capped = forecast(DpParams(epsilon=4, delta=1e-6, reporting_length=2, sensitivity_cap=5), 6)
    assert [x.allowed for x in capped.lengths] == [5, 5]


def test_examples_interval_and_suppression() -> None:
    """A count's 95% interval is ±1.96 sd; small counts are suppressed more often."""
    f = forecast(DpParams(epsilon=1, delta=1e-6, reporting_length=1), 8)
    x = f.lengths[0]
    small, _, big = x.examples
    assert big["high"] - big["count"] == pytest.approx(1.959964 * x.noise_sd, rel=1e-6)
    assert small["p_suppressed"] > 0.99 and big["p_suppressed"] < 1e-6


def test_solve_epsilon_is_the_smallest_meeting_the_target() -> None:
    """The solved ε meets the target and a 1% smaller one does not."""
    base = DpParams(epsilon=1, delta=1e-6, reporting_length=3)
    eps = solve_epsilon(base, 11, 25.0)
    width = forecast(_eps(base, eps), 11).lengths[0].half_width_95
    assert width <= 25.0 < forecast(_eps(base, eps * 0.99), 11).lengths[0].half_width_95


def test_solve_epsilon_refuses_an_impossible_target() -> None:
    """A target no ε ≤ 100 meets is refused with what ε = 100 gives."""
    with pytest.raises(SdsInputError, match=r"no ε up to .*gives"):
        solve_epsilon(DpParams(epsilon=1, delta=1e-6), 40, 0.01)
    with pytest.raises(SdsInputError, match="must be a number > 0"):
        solve_epsilon(DpParams(epsilon=1, delta=1e-6), 4, math.nan)


def _eps(params: DpParams, epsilon: float) -> DpParams:
    from dataclasses import replace

    return replace(params, epsilon=epsilon)
