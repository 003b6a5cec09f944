"""The SDS DP marginals engine (spec §1.3-§1.8), callable stage by stage.

Stages: :func:`protect_record_count` (discrete Laplace), :func:`plan_release` (budget split),
:func:`aggregate_length` for k = 1..R (candidates, DP percentile, contribution bounding,
discrete Gaussian noise, thresholds) and :func:`finalize` (§1.8). Each stage is a pure function
of the data, the previous stages' DP outputs and labelled randomness, so a pipeline can persist
and resume them; :func:`dp_aggregate` runs them all.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import cast

import numpy as np
from numpy.typing import NDArray

from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.dp.accounting import (
    Accounting,
    BudgetPlan,
    StageSpend,
    default_delta,
    plan_budget,
)
from sds_core.dp.declared import declared_one_tuples
from sds_core.dp.noise import add_discrete_gaussian, discrete_laplace
from sds_core.dp.percentile import dp_percentile_from_histogram
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInternalError, invariant, require
from sds_core.marginals._kernels import HAVE_NUMBA, noisy_survivors
from sds_core.marginals.aggregates import AggregateSet, CombinationCounts
from sds_core.marginals.backend import CountingBackend, as_backend
from sds_core.marginals.candidates import CandidateSet
from sds_core.marginals.declared_tuples import (
    active_counts_by_column,
    check_declared,
    declared_threshold,
)
from sds_core.marginals.exact_counts import DEFAULT_CHUNK_RECORDS
from sds_core.marginals.normalization import finalize_counts, round_half_away_from_zero
from sds_core.marginals.params import DpParams
from sds_core.marginals.privacy_report import (
    DeltaParts,
    PrivacyReport,
    delta_parts,
    percentile_upper,
    privacy_report,
)
from sds_core.marginals.steps import LengthStep, RecordCountStep

_NORMAL = NormalDist()
__all__ = [
    "DpResult",
    "LengthStep",
    "PrivacyReport",
    "RecordCountStep",
    "aggregate_length",
    "dp_aggregate",
    "finalize",
    "length_threshold",
    "plan_release",
    "privacy_report",
    "protect_record_count",
    "release_delta_parts",
]


# ---------------------------------------------------------------- stage 1: record count
def protect_record_count(
    table: PreparedTable | CountingBackend,
    params: DpParams,
    rnd: ReleaseRandomness,
    *,
    release_label: str,
) -> RecordCountStep:
    """m = max(1, n + discrete Laplace(1/ε_N)) with ε_N = N_p·ε (spec §1.3; clamping is
    post-processing and replaces the reference's panic on m <= 0).

    Raises:
        SdsInputError: empty table.
    """
    require(table.n_records > 0, "the table is empty: DP aggregation needs at least one record")
    check_declared(table.domain, params.declared_domains)  # refuse before any noise is drawn
    eps_n = params.epsilon * params.number_of_records_epsilon_proportion
    noise = discrete_laplace(
        rnd, f"{release_label}/count/laplace", scale=1.0 / eps_n, size=1, stage="count"
    )
    protected = max(1, table.n_records + int(noise[0]))
    return RecordCountStep(protected, StageSpend("count", "discrete-laplace", eps_n, 0.0, None))


def plan_release(params: DpParams, protected_number_of_records: int) -> BudgetPlan:
    """The budget plan; δ defaults to 1/(ln m·m) from the *protected* count m only (§9.2)."""
    delta = params.delta
    if delta is None:
        delta = default_delta(int(protected_number_of_records))
    return plan_budget(
        epsilon=params.epsilon,
        delta=delta,
        reporting_length=params.reporting_length,
        percentile_epsilon_proportion=params.percentile_epsilon_proportion,
        number_of_records_epsilon_proportion=params.number_of_records_epsilon_proportion,
        sigma_proportions=params.sigma_proportions,
        accounting=cast(Accounting, params.accounting),  # DpParams checks the choices
    )


# ---------------------------------------------------------------- stage 2: one length k
DISCRETE_SHIFT = 1.0
"""Added to ρ_1 because the noise is the *discrete* Gaussian N_Z(0, s²) (s = σ_1√Δ_1).

The reference's ρ_1 makes P(Y > ρ_1 − 1) = 1 − (1 − δ/2)^{1/Δ_1} for a continuous Y ~ N(0, s²).
For integer X ~ N_Z(0, s²) and m >= 1: P(X >= m) <= P(Y >= m − 1), because the normaliser
Σ_x exp(−x²/2s²) >= √(2π)·s (Poisson summation) and each term exp(−x²/2s²), x >= 1, is at most
the integral of the density kernel over [x − 1, x]. A unique tuple survives iff 1 + X > ρ_1 + 1,
i.e. X >= m := ⌊ρ_1 − 1⌋ + 2, so P <= P(Y >= ⌊ρ_1 − 1⌋ + 1) <= P(Y > ρ_1 − 1): the 1-tuple
threshold's δ (δ/2 less the samplers' part, :func:`release_delta_parts`) holds for the discrete
noise. (pac-synth's continuous noise needs no shift.)
"""


def first_threshold(sigma: float, allowed: int, delta: float) -> float:
    """ρ_1 = 1 + σ_1√Δ_1·Φ⁻¹((1 − δ/2)^{1/Δ_1}), computed via the upper tail for precision.

    >>> round(first_threshold(7.1828, 9, 1.8929e-5), 1)
    103.2
    """
    tail = -math.expm1(math.log1p(-delta / 2) / allowed)  # 1 - (1 - δ/2)^{1/Δ}
    return 1.0 + sigma * math.sqrt(allowed) * -_NORMAL.inv_cdf(tail)


def adaptive_threshold(sigma: float, allowed: int, eta: float) -> float:
    """ρ_k = σ_k√Δ_k·Φ⁻¹(1 − min(η/2, 0.5)) (spec §1.7, the code's √Δ_k)."""
    return sigma * math.sqrt(allowed) * -_NORMAL.inv_cdf(min(eta / 2, 0.5))


def release_delta_parts(params: DpParams, plan: BudgetPlan, n_columns: int) -> DeltaParts:
    """Where the release's δ goes (:func:`~sds_core.marginals.privacy_report.delta_parts`):
    ρ_1 is computed at its ``threshold`` part, so the samplers' approximation fits in δ.

    Raises:
        SdsInputError: the samplers' bound does not fit in δ/2.
    """
    return delta_parts(
        plan, n_columns, params.sensitivity_cap, declared=bool(params.declared_domains)
    )


def length_threshold(
    k: int, sigma: float, allowed: int, plan: BudgetPlan, params: DpParams, n_columns: int
) -> float:
    """The suppression threshold of length k for Δ_k = ``allowed`` (the first threshold of
    length 1, else the fabrication mode's fixed or adaptive one): what :func:`aggregate_length`
    applies and what :mod:`sds_core.marginals.forecast` predicts."""
    if k == 1:  # the set union's δ: δ/2 less the samplers' part (release_delta_parts)
        parts = release_delta_parts(params, plan, n_columns)
        return first_threshold(sigma, allowed, 2 * parts.threshold) + DISCRETE_SHIFT
    value = params.fabrication_thresholds()[k]
    if params.fabrication_mode.kind == "fixed":
        return value
    return adaptive_threshold(sigma, allowed, value)


def _candidates(
    data: CountingBackend, k: int, previous: Mapping[int, CombinationCounts]
) -> CandidateSet:
    if k == 1:
        return CandidateSet(data.domain, 1, data.occurring_attributes())
    require(k - 1 in previous, f"aggregate_length({k}) needs the survivors of length {k - 1}")
    prev = previous[k - 1]
    require(prev.length == k - 1, f"previous[{k - 1}] holds combinations of length {prev.length}")
    return CandidateSet(data.domain, k, prev.attrs)


def aggregate_length(
    table: PreparedTable | CountingBackend,
    k: int,
    previous: Mapping[int, CombinationCounts],
    plan: BudgetPlan,
    params: DpParams,
    rnd: ReleaseRandomness,
    *,
    release_label: str,
    chunk_records: int = DEFAULT_CHUNK_RECORDS,
    domain: Domain | None = None,
) -> LengthStep:
    """Run length k of the level-wise loop (spec §1.5 steps 1-7).

    With ``params.declared_domains`` length 1 noises every declared value (Gaussian tail for those
    absent from the data, :func:`sds_core.dp.declared.declared_one_tuples`) and returns the released
    domain in ``LengthStep.domain``; lengths k >= 2 need it as ``domain`` and run on the table
    re-encoded into it (:func:`sds_core.marginals.declared_tuples.reencode`, deterministic).

    The data work (candidate counts, |W_{j,k}| histogram, contribution bounding) goes through
    the :class:`~sds_core.marginals.backend.CountingBackend` (a table: the local one); the DP
    choices are made here once, from the backend's global sums.

    Args:
        table: the sensitive prepared table, or a counting backend holding it.
        k: the length, 1..R.
        previous: survivors of the earlier lengths (at least k−1 for k >= 2).
        plan: the release's budget plan (:func:`plan_release`).
        params: the DP parameters.
        rnd: the release randomness; labels ``{release_label}/aggregate-{k}/...``.
        release_label: prefix of every noise label of this release.
        chunk_records: records per partition (memory bound; does not change the result).
        domain: with declared domains and k >= 2, the released domain of length 1.

    Raises:
        SdsInputError: k outside 1..R, missing previous survivors, empty table, partial
            declared domains, missing ``domain`` for k >= 2 with declared domains.
    """
    r = params.reporting_length
    require(1 <= k <= r, f"length k must be in 1..reporting_length ({r}), got {k}")
    data = as_backend(table, chunk_records)
    require(data.n_records > 0, "the table is empty: DP aggregation needs at least one record")
    declared = check_declared(data.domain, params.declared_domains)
    if declared and k >= 2:
        require(
            domain is not None,
            f"aggregate_length({k}) with declared domains needs domain= the released domain "
            "of length 1 (LengthStep.domain of k = 1)",
        )
        if domain is None:  # unreachable: require() above raised
            raise SdsInternalError("aggregate_length: domain is None after the check")
        data = data.reencoded(domain)
    stage = f"aggregate-{k}"
    prefix = f"{release_label}/{stage}"
    candidates = _candidates(data, k, previous)  # a recipe: built where the records are

    upper = percentile_upper(data.domain.n_columns, k, params.sensitivity_cap)
    if k == 1:
        release_delta_parts(params, plan, data.domain.n_columns)  # refuse before any draw

    def choose_allowed(histogram: NDArray[np.int64]) -> int:
        return dp_percentile_from_histogram(
            histogram,
            percentile=params.percentile_percentage,
            epsilon=plan.epsilon_percentile,
            upper=upper,
            rnd=rnd,
            label=f"{prefix}/percentile",
            stage=stage,
        )

    counts, allowed = data.bounded_counts(
        candidates,
        choose_allowed=choose_allowed,
        record_key=rnd.record_key(f"{prefix}/bounding"),
    )
    # V_k itself only at length 1; from length 2 its size, and the survivors are read off
    # the join (a cluster's driver never builds the (|V_k|, k) array)
    cands = candidates.attrs if k == 1 else None
    if cands is not None and not declared:
        cands, counts = _bounded_universe(cands, counts)
    n_cands = candidates.size if cands is None else int(cands.shape[0])
    invariant(counts.shape[0] == n_cands, f"{counts.shape[0]} counts for |V_{k}| = {n_cands}")
    invariant(0 <= allowed <= upper, f"percentile returned {allowed} outside 0..{upper}")
    spend = next(s for s in plan.stage_spends() if s.stage == stage)
    if declared and k == 1 and allowed == 0:  # sensitivity 0: nothing can be released
        nothing = Domain(data.domain.columns, tuple(() for _ in data.domain.columns))
        return LengthStep(1, CombinationCounts.empty(1), 0, math.inf, 0, spend, nothing)
    if allowed == 0 or (n_cands == 0 and not declared):
        return LengthStep(k, CombinationCounts.empty(k), allowed, math.inf, n_cands, spend)

    sigma = plan.sigma_by_len[k - 1]
    if declared and cands is not None:
        return _declared_length_one(
            data.domain,
            cands,
            counts,
            allowed,
            sigma,
            spend,
            params,
            rnd,
            prefix=prefix,
            stage=stage,
        )
    # the noise is added to the counts in place (the same draws in the same order as
    # discrete_gaussian's): no noise array as large as V_k next to the counts
    noisy = counts if counts.flags.writeable else counts.copy()
    del counts
    add_discrete_gaussian(
        rnd, f"{prefix}/gaussian", noisy, sigma=sigma * math.sqrt(allowed), stage=stage
    )
    threshold = length_threshold(k, sigma, allowed, plan, params, data.domain.n_columns)
    kept = candidates.joined_survivors(noisy, threshold) if cands is None else None
    if kept is None:
        kept = _survivors(candidates.attrs if cands is None else cands, noisy, threshold)
    del noisy
    return LengthStep(k, CombinationCounts(*kept), allowed, threshold, n_cands, spend)


def _bounded_universe(
    cands: NDArray[np.int32], counts: NDArray[np.int64]
) -> tuple[NDArray[np.int32], NDArray[np.int64]]:
    """V_1 after contribution bounding: the values some record still holds (count > 0).

    The DP set union (Gopi et al. 2020; the paper's V_1 = union of the *truncated* W_u) needs
    it: a value a record dropped by bounding and no other record holds must not be a
    candidate, else it is noised and can pass ρ_1, which spends δ/2 on Δ_1 new values only.
    Both counting backends return the same bounded counts, so this is written once, here.
    """
    kept = counts > 0
    if bool(kept.all()):
        return cands, counts
    return np.ascontiguousarray(cands[kept]), np.ascontiguousarray(counts[kept])


def _survivors(
    cands: NDArray[np.int32], noisy: NDArray[np.int64], threshold: float
) -> tuple[NDArray[np.int32], NDArray[np.int64]]:
    """The candidates whose noisy count is > ρ_k and > 0, and those noisy counts."""
    if HAVE_NUMBA:
        kept: tuple[NDArray[np.int32], NDArray[np.int64]] = noisy_survivors(
            cands, noisy, float(threshold)
        )
        return kept
    keep = (noisy > threshold) & (noisy > 0)
    return np.ascontiguousarray(cands[keep]), noisy[keep]


def _declared_length_one(
    table_domain: Domain,
    cands: NDArray[np.int32],
    counts: NDArray[np.int64],
    allowed: int,
    sigma: float,
    spend: StageSpend,
    params: DpParams,
    rnd: ReleaseRandomness,
    *,
    prefix: str,
    stage: str,
) -> LengthStep:
    """Length 1 over declared domains: N_Z(0, σ_1²Δ_1) on every declared value (analytic for
    those absent from the data), threshold :func:`declared_threshold` (post-processing)."""
    scale = sigma * math.sqrt(allowed)
    n_declared = sum(d.total_size for d in params.declared_domains)
    threshold = declared_threshold(scale, n_declared, params.declared_tolerance)
    out = declared_one_tuples(
        table_domain,
        active_counts_by_column(table_domain, cands, counts),
        params.declared_domains,
        sigma=scale,
        threshold=threshold,
        rnd=rnd,
        label=f"{prefix}/declared",
        stage=stage,
    )
    return LengthStep(
        1,
        out.one_tuples,
        allowed,
        float(threshold),
        n_declared,
        spend,
        out.domain,
        out.private_notes,
    )


# ---------------------------------------------------------------- stage 3: finalize
def finalize(
    survivors_by_len: Mapping[int, CombinationCounts],
    *,
    domain: Domain,
    reporting_length: int,
    protected_number_of_records: int,
) -> AggregateSet:
    """Rounding, zero removal, missing parents and normalisation (spec §1.8).

    Counts from :func:`aggregate_length` are integers (discrete noise) so rounding is a no-op;
    float counts (other noise paths) are rounded half away from zero.
    """
    by_len = {}
    for k in range(1, reporting_length + 1):
        cc = survivors_by_len.get(k, CombinationCounts.empty(k))
        if cc.counts.dtype.kind == "f":
            cc = CombinationCounts(cc.attrs, round_half_away_from_zero(cc.counts))
        by_len[k] = cc
    final = finalize_counts(by_len, max(domain.n_attributes, 2))
    return AggregateSet(
        domain, reporting_length, final, int(protected_number_of_records), is_dp=True
    )


# ---------------------------------------------------------------- driver
@dataclass(frozen=True)
class DpResult:
    """DP aggregates and the privacy report (publishable); private notes (private log ONLY)."""

    aggregates: AggregateSet
    report: PrivacyReport
    private_notes: Mapping[str, object] = field(default_factory=dict)


def dp_aggregate(
    table: PreparedTable | CountingBackend,
    params: DpParams,
    rnd: ReleaseRandomness,
    *,
    release_label: str = "release",
    progress: Callable[[str], None] | None = None,
) -> DpResult:
    """All stages in order: record count, plan, lengths 1..R, finalize.

    ``progress`` receives short messages with DP values only (never exact counts).
    """

    def say(msg: str) -> None:
        if progress is not None:
            progress(msg)

    table = as_backend(table)
    count = protect_record_count(table, params, rnd, release_label=release_label)
    say(f"protected record count: {count.protected_number_of_records}")
    plan = plan_release(params, count.protected_number_of_records)
    survivors: dict[int, CombinationCounts] = {}
    steps: list[LengthStep] = []
    for k in range(1, params.reporting_length + 1):
        released = steps[0].domain if steps else None
        step = aggregate_length(
            table, k, survivors, plan, params, rnd, release_label=release_label, domain=released
        )
        survivors[k] = step.survivors
        steps.append(step)
        say(
            f"length {k}: allowed sensitivity {step.allowed_sensitivity}, "
            f"{len(step.survivors)} combinations kept"
        )
    aggregates = finalize(
        survivors,
        domain=steps[0].domain or table.domain,
        reporting_length=params.reporting_length,
        protected_number_of_records=count.protected_number_of_records,
    )
    parts = release_delta_parts(params, plan, table.domain.n_columns)
    report = privacy_report(plan, count, steps, parts)
    return DpResult(aggregates, report, steps[0].private_notes)
