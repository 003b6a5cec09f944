# ruff: noqa: RUF002, RUF003  (the DP literature's notation: σ, ρ, ε, −)
"""Statistical privacy audit of the real DP mechanisms (issue 6 item 3, dp-assurance.md §3): the
mechanisms' privacy measured, not the `sds audit` command (tests/store/audit).

Many runs on neighbouring inputs D and D′, threshold events with Clopper–Pearson bounds at a
family-wise false-alarm rate of 1e-6, and a lower bound on the privacy parameter actually
claimed: ε for the pure parts (record count, percentile), ρ for the zCDP parts (Gaussian). The
real mechanisms must pass; deliberately broken variants must be detected.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats

from sds_core.dp.accounting import plan_budget
from sds_core.dp.noise import discrete_gaussian, discrete_laplace
from sds_core.dp.percentile import percentile_table, sample_percentile
from sds_core.dp.randomness import ReleaseRandomness

pytestmark = pytest.mark.statistical  # make test-fast skips it; make test runs it

FWER = 1e-6
ALPHAS = np.concatenate([np.linspace(1.05, 3, 40), np.geomspace(3, 400, 60)])


def _cp(k: int, n: int, alpha: float) -> tuple[float, float]:
    """One-sided Clopper–Pearson lower and upper bounds, each at level ``alpha``."""
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - alpha, k + 1, n - k))
    return lo, hi


def _renyi_bern(p: float, q: float) -> float:
    """sup over α of D_α(Bern(p) ‖ Bern(q)) / α (a lower bound on ρ by data processing)."""
    if not 0 < q < 1 or p <= q:
        return 0.0
    a = ALPHAS
    with np.errstate(divide="ignore"):
        first = a * math.log(p) + (1 - a) * math.log(q)
        second = a * np.log1p(-p) + (1 - a) * math.log1p(-q) if p < 1 else np.full_like(a, -np.inf)
        d = np.logaddexp(first, second) / (a - 1)
    if not np.all(np.isfinite(d)):
        raise AssertionError(f"Rényi divergence not finite for p={p}, q={q}")
    return float(np.max(d / a))


def audit(out_d: np.ndarray, out_d2: np.ndarray, thresholds: list[int]) -> tuple[float, float]:
    """Lower bounds (ε_lb, ρ_lb) from events {y >= t} and their complements.

    ``out_d2`` comes from the neighbour with the larger true value. Each threshold uses two
    one-sided Clopper–Pearson bounds (P[D′ event] from below, P[D event] from above; the
    complement event reuses them); Bonferroni over all of them gives the 1e-6 family-wise
    false-alarm rate, so a real mechanism passes except with probability <= 1e-6.
    """
    alpha = FWER / (2 * len(thresholds))
    n0, n1 = len(out_d), len(out_d2)
    eps_lb, rho_lb = 0.0, 0.0
    for t in thresholds:
        _, p0_hi = _cp(int((out_d >= t).sum()), n0, alpha)
        p1_lo, _ = _cp(int((out_d2 >= t).sum()), n1, alpha)
        # event {y >= t} favours D′; its complement {y < t} favours D
        for hi_lo, lo_hi in ((p1_lo, p0_hi), (1 - p0_hi, 1 - p1_lo)):
            if hi_lo > 0 and lo_hi > 0:
                eps_lb = max(eps_lb, math.log(hi_lo / lo_hi))
            rho_lb = max(rho_lb, _renyi_bern(hi_lo, lo_hi), _renyi_bern(1 - lo_hi, 1 - hi_lo))
    return eps_lb, rho_lb


# ----------------------------------------------------------------------- record count (pure ε)
COUNT = 1000
EPS_N = 1.0  # ε = 4 with N_p = 0.25: large enough for a sharp audit, same code path


def _count_outputs(scale_factor: float, n: int = 1_000_000) -> tuple[np.ndarray, np.ndarray]:
    plan = plan_budget(
        epsilon=4.0,
        delta=1e-6,
        reporting_length=1,
        percentile_epsilon_proportion=0.01,
        number_of_records_epsilon_proportion=0.25,
        sigma_proportions=[1.0],
    )
    assert plan.epsilon_records == pytest.approx(EPS_N)
    scale = scale_factor / plan.epsilon_records  # the product's scale is 1/ε_N
    rnd = ReleaseRandomness.from_seed(101)
    d = COUNT + discrete_laplace(rnd, "audit/d", scale=scale, size=n, stage="count")
    d2 = COUNT + 1 + discrete_laplace(rnd, "audit/d2", scale=scale, size=n, stage="count")
    return d, d2


COUNT_THRESHOLDS = [COUNT + j for j in (-1, 0, 1, 2, 3)]


def test_record_count_laplace_passes_pure_epsilon_audit() -> None:
    """The record count's discrete Laplace at scale 1/ε_N passes the ε audit (ε_lb <= ε_N)."""
    eps_lb, _ = audit(*_count_outputs(1.0), COUNT_THRESHOLDS)
    assert 0.9 < eps_lb <= EPS_N


@pytest.mark.parametrize("factor", [0.95, 0.5])
def test_record_count_audit_detects_smaller_scale(factor: float) -> None:
    """Negative control: Laplace scale × 0.95 (and × 0.5) is detected (ε_lb > ε_N)."""
    eps_lb, _ = audit(*_count_outputs(factor), COUNT_THRESHOLDS)
    assert eps_lb > EPS_N


# ------------------------------------------------------------------- Gaussian on a marginal (ρ)
def _gauss_plan_sigma() -> float:
    plan = plan_budget(
        epsilon=1.0,
        delta=1e-6,
        reporting_length=1,
        percentile_epsilon_proportion=0.01,
        number_of_records_epsilon_proportion=0.005,
        sigma_proportions=[1.0],
    )
    return plan.sigma_by_len[0]


def _marginal_outputs(
    noise_sigma: float, cells_changed: int, cells_claimed: int, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Statistic = sum of the cells one record touches, as aggregate_length noises them.

    The product adds N_Z(0, σ_k²·Δ_k) to every cell (σ_k·√Δ_k with Δ_k the claimed
    per-record contribution); a neighbour changes ``cells_changed`` cells by one.
    """
    rnd = ReleaseRandomness.from_seed(202)
    s = noise_sigma * math.sqrt(cells_claimed)
    base = 50 * cells_changed

    def run(label: str, shift: int) -> np.ndarray:
        noise = discrete_gaussian(rnd, label, sigma=s, size=n * cells_changed, stage="aggregate-1")
        return base + shift + noise.reshape(n, cells_changed).sum(axis=1)

    return run("audit/d", 0), run("audit/d2", cells_changed)


def _gauss_thresholds(sigma: float, cells: int, claimed: int) -> list[int]:
    sd = sigma * math.sqrt(claimed * cells)
    return [50 * cells + round(f * sd) for f in (0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0)]


def test_marginal_gaussian_passes_zcdp_audit() -> None:
    """The discrete Gaussian at σ_k·√Δ_k passes the ρ audit for Δ_k = 1 and Δ_k = 3."""
    sigma = _gauss_plan_sigma()
    rho = 1 / (2 * sigma**2)
    for cells in (1, 3):
        outs = _marginal_outputs(sigma, cells, cells, 400_000)
        _, rho_lb = audit(*outs, _gauss_thresholds(sigma, cells, cells))
        assert 0.2 * rho < rho_lb <= rho


def test_marginal_audit_detects_halved_sigma() -> None:
    """Negative control: σ halved is detected (ρ_lb > ρ claimed) with 4·10^5 trials."""
    sigma = _gauss_plan_sigma()
    outs = _marginal_outputs(sigma / 2, 1, 1, 400_000)
    _, rho_lb = audit(*outs, _gauss_thresholds(sigma / 2, 1, 1))
    assert rho_lb > 1 / (2 * sigma**2)


def test_marginal_audit_detects_undercounted_sensitivity() -> None:
    """Negative control: a record touching Δ+1 cells with noise for Δ (Δ=1) is detected."""
    sigma = _gauss_plan_sigma()
    outs = _marginal_outputs(sigma, 2, 1, 1_000_000)
    _, rho_lb = audit(*outs, _gauss_thresholds(sigma, 2, 1))
    assert rho_lb > 1 / (2 * sigma**2)


# ------------------------------------------------------------------- percentile (ε and ε²/8)
# a pair on which the EM's privacy loss is large (found by trying small pairs): one record vs
# the same record plus one at the far end of the candidate range 0..4, median (Q = 50)
PCT_D = np.array([0], dtype=np.int64)
PCT_D2 = np.array([0, 4], dtype=np.int64)


def _percentile_outputs(
    eps: float, n: int, broken: Callable[[float], float] = lambda e: e
) -> tuple[np.ndarray, np.ndarray]:
    """Selections of the product's EM (table + exact sampler) on D and D′ = D + one record."""
    rnd = ReleaseRandomness.from_seed(303)
    out = []
    for label, vals in (("audit/d", PCT_D), ("audit/d2", PCT_D2)):
        table = percentile_table(vals, percentile=50, epsilon=broken(eps), upper=4)
        out.append(sample_percentile(table, rnd.words(label, 2 * n, stage="percentile")))
    return out[0], out[1]


def test_percentile_passes_epsilon_and_bounded_range_audit() -> None:
    """The EM percentile passes both its ε-DP and its ε²/8-zCDP (tight accounting) claims."""
    eps = 2.0
    eps_lb, rho_lb = _percentile_outputs_audit(eps)
    assert eps_lb <= eps
    assert rho_lb <= eps**2 / 8
    assert eps_lb > 0.5 * eps  # the pair is informative: the audit sees most of ε


def _percentile_outputs_audit(eps: float, broken: Callable[[float], float] = lambda e: e):
    d, d2 = _percentile_outputs(eps, 300_000, broken)
    return audit(d, d2, [1, 2, 3, 4])


def test_percentile_audit_detects_undercounted_sensitivity() -> None:
    """Negative control: the EM run with sensitivity under-counted (ε × 2) is detected."""
    eps = 2.0
    eps_lb, rho_lb = _percentile_outputs_audit(eps, broken=lambda e: 2 * e)
    assert eps_lb > eps or rho_lb > eps**2 / 8


# ------------------------------------------- end to end: aggregate_length on D and D′ (k = 1)
E2E_RUNS = 2000


def _e2e_outputs(monkeypatch: pytest.MonkeyPatch | None, sigma_factor: float) -> tuple:
    """Sum of the released 1-counts of the added record's cells, over many release keys."""
    import importlib

    dp_aggregate = importlib.import_module("sds_core.marginals.engine")  # the module
    from sds_core.data.domain import Domain
    from sds_core.data.table import PreparedTable
    from sds_core.marginals.params import DpParams

    if monkeypatch is not None:
        real = dp_aggregate.add_discrete_gaussian  # the name the engine calls

        def broken(rnd, label, values, *, sigma, stage):
            real(rnd, label, values, sigma=sigma * sigma_factor, stage=stage)

        monkeypatch.setattr(dp_aggregate, "add_discrete_gaussian", broken)
    dom = Domain(("A", "B"), (("a",), ("b",)))
    tables = (
        PreparedTable(dom, np.zeros((300, 2), np.int32)),
        PreparedTable(dom, np.zeros((301, 2), np.int32)),  # D′ = D + one record (a, b)
    )
    params = DpParams(epsilon=12.0, delta=1e-6, reporting_length=1)
    plan = dp_aggregate.plan_release(params, 300)  # m public and equal on both sides
    outs = []
    for side, table in enumerate(tables):
        out = np.empty(E2E_RUNS, dtype=np.int64)
        for i in range(E2E_RUNS):
            rnd = ReleaseRandomness.from_seed(side * 10**6 + i)
            step = dp_aggregate.aggregate_length(table, 1, {}, plan, params, rnd, release_label="r")
            out[i] = step.survivors.counts.sum() if len(step.survivors.counts) == 2 else -1
        outs.append(out)
    sigma = plan.sigma_by_len[0]
    thresholds = [600 + round(f * 2 * sigma) for f in (0.25, 0.5, 1.0, 1.5, 2.0, 2.5)]
    return outs[0], outs[1], thresholds, plan.rho_by_len[0]


@pytest.mark.slow
def test_end_to_end_aggregate_length_passes_zcdp_audit() -> None:
    """Through the real aggregation code on D and D′, length 1 stays within its ρ_1."""
    d, d2, thresholds, rho_1 = _e2e_outputs(None, 1.0)
    assert (d > 0).all() and (d2 > 0).all()  # both cells always released at this size
    _, rho_lb = audit(d, d2, thresholds)
    assert 0.1 * rho_1 < rho_lb <= rho_1


@pytest.mark.slow
def test_end_to_end_audit_detects_halved_sigma(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: the same pipeline with σ halved inside aggregate_length is detected."""
    d, d2, thresholds, rho_1 = _e2e_outputs(monkeypatch, 0.5)
    _, rho_lb = audit(d, d2, thresholds)
    assert rho_lb > rho_1
