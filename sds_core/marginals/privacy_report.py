"""The privacy report of one DP aggregation: what a ledger records (DP or public values only).

Assembled by :func:`sds_core.marginals.engine.dp_aggregate` from the budget plan and the stage
outputs (record count, one step per length); re-exported by :mod:`sds_core.marginals.engine`.
Also where δ goes (:func:`delta_parts`: the zCDP conversion, the 1-tuple threshold and the noise
samplers' approximation), which the engine's ρ_1, the manifest and the ledger read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sds_core.dp.accounting import BudgetPlan, StageSpend
from sds_core.dp.noise import tv_bound
from sds_core.dp.percentile import percentile_tv_bound
from sds_core.errors import require
from sds_core.marginals.steps import LengthStep, RecordCountStep


def _json_float(x: float) -> float | None:
    return x if math.isfinite(x) else None


def percentile_upper(n_columns: int, k: int, sensitivity_cap: int | None) -> int:
    """The DP percentile's largest candidate Δ_k: min(C(d, k), sensitivity_cap), public.

    >>> percentile_upper(11, 3, None), percentile_upper(11, 3, 40)
    (165, 40)
    """
    upper = math.comb(n_columns, k)
    return upper if sensitivity_cap is None else min(upper, sensitivity_cap)


def sampler_bound(plan: BudgetPlan, n_columns: int, sensitivity_cap: int | None) -> float:
    """T: how far the release's samplers may be from exact noise where one record matters.

    Neighbouring inputs differ in at most Δ_k ≤ upper_k noised cells per length (after
    contribution bounding; at k = 1 the record's own new values included) and in the record
    count. A hybrid mechanism that draws exactly those cells from the exact distributions (the
    others from the tables, alike on both inputs) has the exact mechanism's (ε, δ) by the same
    proof; it is within TV T of the real one on either input, with T the sum over those cells of
    :func:`~sds_core.dp.noise.tv_bound`, plus each length's percentile sampler
    (:func:`~sds_core.dp.percentile.percentile_tv_bound`). Every term is data-independent: σ_k
    and the Laplace scale come from the plan, upper_k from the column count and the cap.
    """
    total = tv_bound("laplace", 1.0 / plan.epsilon_records)
    for k, sigma in enumerate(plan.sigma_by_len, start=1):
        upper = percentile_upper(n_columns, k, sensitivity_cap)
        total += percentile_tv_bound(upper)
        if upper > 0:
            total += upper * tv_bound("gaussian", sigma * math.sqrt(upper))
    return total


@dataclass(frozen=True)
class DeltaParts:
    """Where a release's δ goes; :attr:`total` (the effective δ) never exceeds the plan's δ.

    Attributes:
        zcdp: δ/2, at which the zCDP part (percentiles and counts) is converted to (ε_M, δ).
        threshold: the 1-tuple threshold's DP set union (ρ_1 is computed at this δ):
            δ/2 − sampler; 0 with declared domains (no data-dependent 1-tuple domain).
        sampler: (1 + e^ε)·T, T = :func:`sampler_bound`: the table samplers' approximation of
            exact noise, paid from the 1-tuple threshold's δ/2.
    """

    zcdp: float
    threshold: float
    sampler: float

    @property
    def total(self) -> float:
        """The effective δ: the release is (ε, total)-DP with the samplers it really uses."""
        return math.fsum((self.zcdp, self.threshold, self.sampler))

    def to_dict(self) -> dict[str, float]:
        """JSON-ready (the manifest's ``privacy.delta_parts``, a ledger charge's detail)."""
        return {
            "zcdp": self.zcdp,
            "one_tuple_threshold": self.threshold,
            "noise_sampler": self.sampler,
        }


def delta_parts(
    plan: BudgetPlan, n_columns: int, sensitivity_cap: int | None, *, declared: bool
) -> DeltaParts:
    """The release's :class:`DeltaParts`: public (plan, column count, cap, declared or not).

    Raises:
        SdsInputError: the samplers' bound (1 + e^ε)·T does not fit in δ/2 (a huge ε, δ too
            small, or very many columns without a sensitivity cap).
    """
    half = plan.delta / 2
    sampler = (1.0 + math.exp(plan.epsilon)) * sampler_bound(plan, n_columns, sensitivity_cap)
    require(
        sampler < half,
        f"the noise samplers' approximation bound (1 + e^ε)·T = {sampler:.3g} (ε = "
        f"{plan.epsilon:g}, {n_columns} columns, sensitivity_cap {sensitivity_cap}) does not fit "
        f"in δ/2 = {half:.3g}; use a smaller epsilon, a larger delta or a sensitivity_cap",
    )
    threshold = 0.0 if declared else math.nextafter(half - sampler, 0.0)  # rounded down
    return DeltaParts(zcdp=half, threshold=threshold, sampler=sampler)


@dataclass(frozen=True)
class PrivacyReport:
    """What a ledger records about one DP aggregation (all values are DP or public).

    ``delta_parts`` says where δ goes, the table samplers' approximation included
    (:func:`delta_parts`); the release is (ε, effective_delta)-DP with effective_delta ≤ δ.
    Per-length tuples are indexed k−1; a threshold of inf means nothing was released.
    """

    epsilon: float
    delta: float
    rho: float
    epsilon_percentile: float
    sigma_by_len: tuple[float, ...]
    allowed_sensitivity_by_len: tuple[int, ...]
    threshold_by_len: tuple[float, ...]
    rho_by_len: tuple[float, ...]
    spends: tuple[StageSpend, ...]
    accounting: str
    delta_parts: DeltaParts

    @property
    def effective_delta(self) -> float:
        """δ of the guarantee with the samplers really used (≤ δ, which the ledger charges)."""
        return self.delta_parts.total

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (inf thresholds become None)."""
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "effective_delta": self.effective_delta,
            "delta_parts": self.delta_parts.to_dict(),
            "rho": self.rho,
            "epsilon_percentile": self.epsilon_percentile,
            "sigma_by_len": list(self.sigma_by_len),
            "allowed_sensitivity_by_len": list(self.allowed_sensitivity_by_len),
            "threshold_by_len": [_json_float(t) for t in self.threshold_by_len],
            "rho_by_len": list(self.rho_by_len),
            "spends": [
                {
                    "stage": s.stage,
                    "mechanism": s.mechanism,
                    "epsilon": s.epsilon,
                    "delta": s.delta,
                    "rho": s.rho,
                }
                for s in self.spends
            ],
            "accounting": self.accounting,
        }


def privacy_report(
    plan: BudgetPlan, count: RecordCountStep, steps: list[LengthStep], parts: DeltaParts
) -> PrivacyReport:
    """Assemble the report from the plan, the stage outputs and the δ parts."""
    return PrivacyReport(
        epsilon=plan.epsilon,
        delta=plan.delta,
        rho=plan.rho,
        epsilon_percentile=plan.epsilon_percentile,
        sigma_by_len=plan.sigma_by_len,
        allowed_sensitivity_by_len=tuple(st.allowed_sensitivity for st in steps),
        threshold_by_len=tuple(st.threshold for st in steps),
        rho_by_len=plan.rho_by_len,
        spends=(count.spend, *(st.spend for st in steps)),
        accounting=plan.accounting,
        delta_parts=parts,
    )


HOW_TO_READ_NOISE = (
    "Each published count of length k is the true count plus integer noise drawn from a "
    "discrete Gaussian with standard deviation noise_sd = sigma * sqrt(allowed_sensitivity), "
    "so about 95% of the counts lie within 1.96 * noise_sd of the true count (e.g. a count of "
    "500 with noise_sd 20 means roughly 460 to 540). Combinations whose noisy count was at or "
    "below the length's threshold were suppressed, and the survivors were then made "
    "consistent (post-processing), so small published counts lean high. The record count "
    "has discrete Laplace noise of the given scale (standard deviation noise_sd). A length "
    "with allowed_sensitivity 0 released nothing (threshold null)."
)
"""The manifest's one-paragraph guide to :func:`noise_description`."""


def discrete_laplace_sd(scale: float) -> float:
    """Standard deviation of the discrete Laplace distribution of ``scale`` (t = 1/ε).

    P(x) ∝ q^|x| with q = e^(−1/scale) has variance 2q / (1 − q)².

    >>> round(discrete_laplace_sd(1.0), 3)
    1.357
    """
    q = math.exp(-1.0 / scale)
    return math.sqrt(2.0 * q) / (1.0 - q)


def noise_description(
    plan: BudgetPlan,
    allowed_sensitivity_by_len: tuple[int, ...] | list[int],
    threshold_by_len: tuple[float, ...] | list[float],
) -> dict[str, Any]:
    """The noise of one SDS release, for error bars: record count and every length k.

    All values are DP outputs (Δ_k, thresholds that depend on Δ_k) or data-independent (σ_k,
    the Laplace scale), so they may be published. ``threshold`` is None where it is infinite
    (Δ_k = 0: nothing released).

    >>> from sds_core.dp.accounting import plan_budget
    >>> plan = plan_budget(epsilon=4.0, delta=1e-6, reporting_length=2,
    ...     percentile_epsilon_proportion=0.01, number_of_records_epsilon_proportion=0.005,
    ...     sigma_proportions=(1.0, 1.0))
    >>> d = noise_description(plan, [3, 0], [40.5, math.inf])
    >>> d["record_count"]["scale"], [x["threshold"] for x in d["by_length"]]
    (50.0, [40.5, None])
    """
    by_length = []
    for k, (allowed, threshold) in enumerate(
        zip(allowed_sensitivity_by_len, threshold_by_len, strict=True), start=1
    ):
        sigma = plan.sigma_by_len[k - 1]
        by_length.append(
            {
                "length": k,
                "mechanism": "discrete-gaussian",
                "sigma": sigma,
                "allowed_sensitivity": int(allowed),
                "threshold": _json_float(float(threshold) + 0.0),  # no -0.0
                "noise_sd": sigma * math.sqrt(int(allowed)),
            }
        )
    scale = 1.0 / plan.epsilon_records
    return {
        "record_count": {
            "mechanism": "discrete-laplace",
            "scale": scale,
            "noise_sd": discrete_laplace_sd(scale),
        },
        "by_length": by_length,
        "how_to_read": HOW_TO_READ_NOISE,
    }
