"""What an SDS release would publish, computed before any data is read (``sds plan``).

From the DP parameters and public facts of the schema only (the number of columns, how many of
them can be empty), per length k: σ_k, the range of Δ_k the DP percentile may choose
(0..C(d, k), capped by ``sensitivity_cap``) and the most likely one, the per-count noise and its
95% half-width, the suppression threshold, and what a count of 10, 100 or 1,000 would look like.
The per-length figures are those :func:`sds_core.marginals.privacy_report.noise_description`
gives a real release for the same Δ_k (the same functions compute both), so a plan and the
release that follows agree within the choice of Δ_k. Nothing here reads a record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from math import comb
from statistics import NormalDist
from typing import Any

from sds_core.dp.intervals import Z_95
from sds_core.errors import SdsInputError, require
from sds_core.marginals.engine import length_threshold, plan_release, release_delta_parts
from sds_core.marginals.params import DpParams
from sds_core.marginals.privacy_report import noise_description

__all__ = [
    "EXAMPLE_COUNTS",
    "LengthForecast",
    "ReleaseForecast",
    "forecast",
    "solve_epsilon",
]

EXAMPLE_COUNTS = (10, 100, 1000)
"""True counts whose published form a plan shows (interval and chance of suppression)."""
MAX_EPSILON = 100.0
"""The largest ε :func:`solve_epsilon` considers."""


@dataclass(frozen=True, slots=True)
class LengthForecast:
    """The forecast of one length k (``allowed`` is the most likely Δ_k)."""

    length: int
    sigma: float
    allowed_range: tuple[int, int]
    allowed: int
    noise_sd: float
    half_width_95: float
    threshold: float | None
    examples: tuple[dict[str, float], ...]

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (for --json)."""
        return {
            "length": self.length,
            "sigma": self.sigma,
            "allowed_sensitivity_range": list(self.allowed_range),
            "allowed_sensitivity_likely": self.allowed,
            "noise_sd": self.noise_sd,
            "half_width_95": self.half_width_95,
            "threshold": self.threshold,
            "examples": list(self.examples),
        }


@dataclass(frozen=True, slots=True)
class ReleaseForecast:
    """The forecast of a release: the record count's noise and every length's figures."""

    epsilon: float
    delta: float
    record_count_noise_sd: float
    lengths: tuple[LengthForecast, ...]

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (for --json)."""
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "record_count_noise_sd": self.record_count_noise_sd,
            "by_length": [x.to_dict() for x in self.lengths],
        }


def forecast(
    params: DpParams,
    n_columns: int,
    n_nonempty: int | None = None,
    *,
    allowed_by_len: tuple[int, ...] | None = None,
) -> ReleaseForecast:
    """The noise a release with ``params`` would have, before reading any data.

    Args:
        params: the release's DP parameters; δ must be explicit (a release fixes it before
            reading the data).
        n_columns: the number d of released columns (public: the header or the schema).
        n_nonempty: how many columns a typical record has a value in (default all: a schema
            whose columns allow no nulls); the most likely Δ_k is C(n_nonempty, k), what the
            DP percentile picks when most records fill that many columns.
        allowed_by_len: Δ_k to use instead of the most likely ones (a release's chosen Δ_k:
            the forecast then equals that release's noise description).

    Raises:
        SdsInputError: no columns, n_nonempty outside 1..n_columns, or δ not given.

    >>> f = forecast(DpParams(epsilon=4.0, delta=1e-6, reporting_length=2), 11)
    >>> [(x.length, x.allowed_range, x.allowed) for x in f.lengths]
    [(1, (0, 11), 11), (2, (0, 55), 55)]
    """
    require(n_columns >= 1, f"a release needs at least one column, got {n_columns}")
    nonempty = n_columns if n_nonempty is None else n_nonempty
    require(
        1 <= nonempty <= n_columns,
        f"n_nonempty must be in 1..n_columns ({n_columns}), got {n_nonempty}",
    )
    if params.delta is None:
        raise SdsInputError("a forecast needs an explicit δ (a release fixes it before reading)")
    plan = plan_release(params, 1)  # δ explicit: the record count does not enter the plan
    allowed, thresholds, ranges = [], [], []
    for k in range(1, params.reporting_length + 1):
        upper = comb(n_columns, k)
        if params.sensitivity_cap is not None:
            upper = min(upper, params.sensitivity_cap)
        likely = min(comb(nonempty, k), upper)
        if allowed_by_len is not None:
            require(
                len(allowed_by_len) == params.reporting_length,
                f"allowed_by_len needs one Δ_k per length 1..{params.reporting_length}",
            )
            likely = int(allowed_by_len[k - 1])
        sigma = plan.sigma_by_len[k - 1]
        allowed.append(likely)
        ranges.append((0, upper))
        thresholds.append(
            length_threshold(k, sigma, likely, plan, params, n_columns) if likely > 0 else math.inf
        )
    described = noise_description(plan, allowed, thresholds)
    lengths = []
    for entry, rng_k in zip(described["by_length"], ranges, strict=True):
        sd = float(entry["noise_sd"])
        threshold = entry["threshold"]
        lengths.append(
            LengthForecast(
                length=int(entry["length"]),
                sigma=float(entry["sigma"]),
                allowed_range=rng_k,
                allowed=int(entry["allowed_sensitivity"]),
                noise_sd=sd,
                half_width_95=Z_95 * sd,
                threshold=None if threshold is None else float(threshold),
                examples=tuple(_example(c, sd, threshold) for c in EXAMPLE_COUNTS),
            )
        )
    return ReleaseForecast(
        epsilon=plan.epsilon,
        delta=plan.delta,
        record_count_noise_sd=float(described["record_count"]["noise_sd"]),
        lengths=tuple(lengths),
    )


def _example(count: int, sd: float, threshold: float | None) -> dict[str, float]:
    """A true ``count``'s 95% interval and the chance its noisy count is suppressed
    (at or below the threshold), with the continuous Gaussian for the discrete one."""
    if threshold is None:  # Δ_k = 0: nothing of this length is released
        return {"count": count, "low": math.nan, "high": math.nan, "p_suppressed": 1.0}
    p = NormalDist(count, sd).cdf(threshold) if sd > 0 else float(count <= threshold)
    half = Z_95 * sd
    return {"count": count, "low": count - half, "high": count + half, "p_suppressed": p}


def solve_epsilon(
    params: DpParams, n_columns: int, target_half_width: float, n_nonempty: int | None = None
) -> float:
    """The smallest ε (to 3 significant digits, at most :data:`MAX_EPSILON`) whose length-1
    95% half-width is at most ``target_half_width``, everything else as in ``params``.

    Raises:
        SdsInputError: the target is not > 0, or no ε ≤ 100 meets it (the message says what
            ε = 100 gives and what would help).
    """
    if not target_half_width > 0 or not math.isfinite(target_half_width):
        raise SdsInputError(f"--target-ci must be a number > 0, got {target_half_width!r}")

    def width(eps: float) -> float:
        p = _with_epsilon(params, eps)
        return forecast(p, n_columns, n_nonempty).lengths[0].half_width_95

    top = _largest_epsilon(params, n_columns)
    best = width(top)
    if best > target_half_width:
        raise SdsInputError(
            f"no ε up to {top:.3g} gives a length-1 95% half-width of at most "
            f"{target_half_width:g} (ε = {top:.3g} gives {best:.3g}); ask for a wider "
            "interval, release fewer columns (use_columns), or lower reporting_length"
        )
    lo, hi = 1e-4, top
    while hi / lo > 1.0005:  # the width falls as ε grows: bisect on a log scale
        mid = math.sqrt(lo * hi)
        if width(mid) <= target_half_width:
            hi = mid
        else:
            lo = mid
    return float(f"{hi:.3g}") if width(float(f"{hi:.3g}")) <= target_half_width else hi


def _largest_epsilon(params: DpParams, n_columns: int) -> float:
    """:data:`MAX_EPSILON`, or less where the noise samplers' approximation bound
    (:func:`~sds_core.marginals.privacy_report.delta_parts`, growing as e^ε) no longer fits in
    δ/2: the largest ε a release with these parameters accepts, to 0.05%."""

    def fits(eps: float) -> bool:
        p = _with_epsilon(params, eps)
        try:
            release_delta_parts(p, plan_release(p, 1), n_columns)
        except SdsInputError:
            return False
        return True

    if fits(MAX_EPSILON):
        return MAX_EPSILON
    lo, hi = 1e-4, MAX_EPSILON
    if not fits(lo):
        low = _with_epsilon(params, lo)
        release_delta_parts(low, plan_release(low, 1), n_columns)  # raises: δ too small
    while hi / lo > 1.0005:
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def _with_epsilon(params: DpParams, epsilon: float) -> DpParams:
    from dataclasses import replace

    return replace(params, epsilon=epsilon)
