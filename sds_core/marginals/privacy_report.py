"""The privacy report of one DP aggregation: what a ledger records (DP or public values only).

Assembled by :func:`sds_core.marginals.engine.dp_aggregate` from the budget plan and the stage
outputs (record count, one step per length); re-exported by :mod:`sds_core.marginals.engine`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sds_core.dp.accounting import BudgetPlan, StageSpend
from sds_core.dp.noise import table_delta
from sds_core.marginals.steps import LengthStep, RecordCountStep


def _json_float(x: float) -> float | None:
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class PrivacyReport:
    """What a ledger records about one DP aggregation (all values are DP or public).

    ``table_delta`` is the total-variation bound of the table-based noise samplers; the
    guarantee including it is (ε, δ + (1 + e^ε)·table_delta), see
    :func:`sds_core.dp.noise.table_delta`.
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
    table_delta: float

    @property
    def effective_delta(self) -> float:
        """δ including the noise samplers' table approximation."""
        return self.delta + (1 + math.exp(self.epsilon)) * self.table_delta

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (inf thresholds become None)."""
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "effective_delta": self.effective_delta,
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
            "table_delta": self.table_delta,
        }


def privacy_report(
    plan: BudgetPlan, count: RecordCountStep, steps: list[LengthStep]
) -> PrivacyReport:
    """Assemble the report from the plan and the stage outputs."""
    tv = table_delta("laplace", 1.0 / plan.epsilon_records, 1)
    for st in steps:
        if st.allowed_sensitivity > 0 and st.n_candidates > 0:
            scale = plan.sigma_by_len[st.length - 1] * math.sqrt(st.allowed_sensitivity)
            tv += table_delta("gaussian", scale, st.n_candidates)
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
        table_delta=tv,
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
