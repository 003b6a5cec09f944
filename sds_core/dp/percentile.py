# ruff: noqa: RUF002  (the DP literature's notation: σ, ρ, ε, −)
"""The DP percentile that picks each length's allowed sensitivity Δ_k (spec §1.6, §9.1).

``quantile_r8`` and ``reference_scores`` reproduce pac-synth's non-private pieces exactly (for
cross-checks). ``dp_percentile`` is the mechanism the product runs: the exponential mechanism
over the data-independent candidates 0..upper with a rank quality of bounded sensitivity and a
data-independent base measure favouring small candidates, sampled exactly from the keyed stream.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Context, Decimal
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError, invariant

_CTX = Context(prec=60)
_TWO64 = Decimal(1 << 64)


def quantile_r8(values: NDArray[np.number[Any]], q: float) -> float:
    """Hyndman–Fan R-8 quantile (statrs; numpy ``method="median_unbiased"``), spec §1.6.

    h = (n + 1/3)·q + 1/3, f = floor(h); f <= 0 → min, f >= n → max, else
    x_(f) + (h − f)(x_(f+1) − x_(f)) with 1-based order statistics.

    >>> quantile_r8(np.array([0, 1, 4, 5, 5, 8, 11, 12, 12, 15]), 0.6)
    9.6
    """
    x = np.sort(np.asarray(values, dtype=np.float64).ravel())
    n = len(x)
    if n == 0:
        raise SdsInputError("quantile_r8 needs at least one value, got an empty array")
    if not 0 <= q <= 1:
        raise SdsInputError(f"quantile q must be in [0, 1], got {q!r}")
    h = (n + 1 / 3) * q + 1 / 3
    f = math.floor(h)
    if f <= 0:
        return float(x[0])
    if f >= n:
        return float(x[-1])
    return float(x[f - 1] + (h - f) * (x[f] - x[f - 1]))


def _check_percentile(percentile: int) -> int:
    if not isinstance(percentile, int | np.integer) or isinstance(percentile, bool):
        raise SdsInputError(f"percentile must be an integer in 0..100, got {percentile!r}")
    if not 0 <= percentile <= 100:
        raise SdsInputError(f"percentile must be in 0..100, got {percentile!r}")
    return int(percentile)


def _check_upper(upper: int) -> int:
    if not isinstance(upper, int | np.integer) or isinstance(upper, bool) or not 0 <= upper < 2**31:
        raise SdsInputError(f"upper must be an integer in 0..2^31-1, got {upper!r}")
    return int(upper)


def reference_scores(
    values: NDArray[np.integer], percentile: int, upper: int | None = None
) -> NDArray[np.int64]:
    """pac-synth's rank-distance scores −s(v) for v = 0..max (or 0..upper), spec §1.6.

    Reproduces the reference exactly, including its test vectors. With ``upper`` > max the
    vector continues the reference's own rule for candidates absent from the data,
    s(v) = max(s(v−1), 1), beyond the maximum (which keeps its special value).

    Privacy note: this score is NOT a sensitivity-1 quality function. Its pivot (the percentile
    value) and its special cases (absent 0, the maximum) move with the data: adding one record
    can change a score by 5 on ten records (e.g. Q=50, [0,0,1,3,4,5,5,5,5,6] plus a 5), and more
    with more ties. pac-synth's ε_Q claim for it therefore does not hold; :func:`dp_percentile`
    uses :func:`rank_scores` instead. Kept for cross-checks with the reference only.
    """
    q_pct = _check_percentile(percentile)
    x = np.sort(np.asarray(values, dtype=np.int64).ravel())
    n = len(x)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    top = int(x[-1]) if upper is None else max(_check_upper(upper), int(x[-1]))
    m = int(x[-1])
    q = math.floor(quantile_r8(x, q_pct / 100))
    pi = int(np.searchsorted(x, q, side="right")) - 1
    pv = int(x[pi])
    cand = np.arange(top + 1)
    cnt = np.searchsorted(x, cand, side="right")  # #{x <= v}
    present = (cnt > 0) & (x[np.maximum(cnt - 1, 0)] == cand)
    out = np.empty(top + 1, dtype=np.int64)
    prev = 0
    for v in range(top + 1):
        if v == pv:
            s = 0
        elif v < pv:
            if present[v]:
                s = pi - (int(cnt[v]) - 1)
            elif v == 0:
                s = math.ceil(n * q_pct / 100)
            else:
                s = max(prev, 1)
        elif v == m:
            s = math.ceil(n * (1 - q_pct / 100))
        elif present[v]:
            s = int(cnt[v]) - 1 - pi
        else:
            s = max(prev, 1)
        out[v] = -s
        prev = s
    return out


def rank_scores(values: NDArray[np.integer], percentile: int, upper: int) -> NDArray[np.int64]:
    """The quality u(v) = −|(100−Q)·L(v) − Q·G(v)| for v = 0..upper (integer, in units of 1/100).

    L(v) = #{x < v}, G(v) = #{x > v}. Its maximum is where a fraction Q/100 of the values lies
    below v. Sensitivity (add or remove one record x'): if x' < v only L changes, by 1, so u
    changes by at most 100−Q; if x' > v only G changes, so u changes by at most Q; if x' = v
    nothing changes. Hence Δu = max(Q, 100−Q) <= 100, for every candidate, whatever the data
    and whatever ``upper``: the candidate range 0..upper is fixed before seeing the data.
    """
    q_pct = _check_percentile(percentile)
    top = _check_upper(upper)
    x = np.sort(np.asarray(values, dtype=np.int64).ravel())
    cand = np.arange(top + 1)
    below = np.searchsorted(x, cand, side="left")
    above = len(x) - np.searchsorted(x, cand, side="right")
    score: NDArray[np.int64] = -np.abs((100 - q_pct) * below - q_pct * above).astype(np.int64)
    return score


BASE_MEASURE_POWER = 2
"""a in the base measure μ(v) = 2^(−a·⌊log2(v + 1)⌋) (≈ (v + 1)^−a, piecewise constant)."""


def base_measure_octave(candidates: NDArray[np.integer]) -> NDArray[np.int64]:
    """⌊log2(v + 1)⌋ for each candidate v >= 0 (exact integer arithmetic).

    >>> base_measure_octave(np.array([0, 1, 2, 3, 6, 7, 15])).tolist()
    [0, 1, 1, 2, 2, 3, 4]
    """
    _, exponent = np.frexp(np.asarray(candidates, dtype=np.int64) + 1.0)  # exact below 2^53
    octave: NDArray[np.int64] = exponent.astype(np.int64) - 1
    return octave


def log_base_measure(candidates: NDArray[np.integer]) -> NDArray[np.float64]:
    """ln μ(v) = −a·ln 2·⌊log2(v + 1)⌋, a = :data:`BASE_MEASURE_POWER` (for tests and audits)."""
    return -BASE_MEASURE_POWER * math.log(2) * base_measure_octave(candidates).astype(np.float64)


@dataclass(frozen=True, slots=True)
class PercentileTable:
    """The exponential mechanism's distribution, grouped into runs of equal score and base measure.

    Candidate ``starts[i] + j`` (0 <= j < lengths[i]) has probability
    (cdf[i] − cdf[i−1]) / 2^64 / lengths[i] (cdf[−1] = 0, cdf[last] = 2^64).
    """

    starts: NDArray[np.int64]
    lengths: NDArray[np.int64]
    cdf_u64: NDArray[np.uint64]  # len(starts) - 1 entries
    probabilities: NDArray[np.float64]  # exact run probabilities (float, for tests/audits)


def percentile_table(
    values: NDArray[np.integer], *, percentile: int, epsilon: float, upper: int
) -> PercentileTable:
    """The EM distribution P(v) ∝ μ(v)·exp(ε·u(v) / (2·Δu)) over v = 0..upper.

    u = :func:`rank_scores`, μ(v) = 2^(−a·⌊log2(v + 1)⌋) (:data:`BASE_MEASURE_POWER`). Both are
    constant on the runs between data values, data values and octave boundaries 2^j − 1, so
    the table has at most 2·(distinct values) + log2(upper + 1) + 2 runs.
    """
    x = np.sort(np.asarray(values, dtype=np.int64).ravel())
    top = _check_upper(upper)

    def ranks(starts: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        below = np.searchsorted(x, starts, side="left")
        return below, len(x) - np.searchsorted(x, starts, side="right")

    distinct = np.unique(x[(x >= 0) & (x <= top)])
    return _em_table(distinct, ranks, percentile=percentile, epsilon=epsilon, upper=upper)


def percentile_table_from_histogram(
    histogram: NDArray[np.integer], *, percentile: int, epsilon: float, upper: int
) -> PercentileTable:
    """:func:`percentile_table` of the values whose counts are ``histogram`` (value v occurs
    ``histogram[v]`` times, v >= 0): the same table, from a histogram that partitions sum.

    >>> v = np.array([0, 1, 1, 3, 7, 9])
    >>> a = percentile_table(v, percentile=50, epsilon=1.0, upper=8)
    >>> b = percentile_table_from_histogram(np.bincount(v), percentile=50, epsilon=1.0, upper=8)
    >>> bool((a.cdf_u64 == b.cdf_u64).all() and (a.starts == b.starts).all())
    True
    """
    h = np.asarray(histogram, dtype=np.int64).ravel()
    if (h < 0).any():
        raise SdsInputError("histogram counts must be >= 0 (value v occurs histogram[v] times)")
    top = _check_upper(upper)
    cum = np.cumsum(h)
    n = int(cum[-1]) if h.size else 0

    def ranks(starts: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        if not h.size:
            zero = np.zeros(starts.shape[0], dtype=np.int64)
            return zero, zero
        last = h.size - 1
        below = np.where(starts > 0, cum[np.minimum(starts - 1, last)], 0)
        return below, n - np.where(starts <= last, cum[np.minimum(starts, last)], n)

    distinct = np.flatnonzero(h[: top + 1]).astype(np.int64)
    return _em_table(distinct, ranks, percentile=percentile, epsilon=epsilon, upper=upper)


def _em_table(
    distinct: NDArray[np.int64],
    ranks: Callable[[NDArray[np.int64]], tuple[NDArray[np.int64], NDArray[np.int64]]],
    *,
    percentile: int,
    epsilon: float,
    upper: int,
) -> PercentileTable:
    """The table given the distinct data values in 0..upper and ``ranks(starts)`` = the number
    of values below and above each start."""
    q_pct = _check_percentile(percentile)
    top = _check_upper(upper)
    if not isinstance(epsilon, int | float) or not math.isfinite(epsilon) or epsilon <= 0:
        raise SdsInputError(f"percentile epsilon must be a finite number > 0, got {epsilon!r}")
    # runs: the gaps between data values and the data values themselves (score is constant)
    octaves = (1 << np.arange(1, max(top + 2, 2).bit_length(), dtype=np.int64)) - 1
    bounds = np.unique(np.concatenate([[0], distinct, distinct + 1, octaves, [top + 1]]))
    bounds = bounds[bounds <= top + 1]
    starts = bounds[:-1].astype(np.int64)
    lengths = np.diff(bounds).astype(np.int64)
    below, above = ranks(starts)
    u = -np.abs((100 - q_pct) * below - q_pct * above).astype(np.int64)
    sens = max(q_pct, 100 - q_pct)
    coef = _CTX.divide(Decimal(repr(float(epsilon))), 2 * sens)
    u_max = int(u.max())
    octave = base_measure_octave(starts)
    weights = [
        _CTX.multiply(
            _CTX.divide(int(length), Decimal(2) ** (BASE_MEASURE_POWER * int(j))),
            _CTX.exp(_CTX.multiply(coef, int(s) - u_max)),
        )
        for s, length, j in zip(u, lengths, octave, strict=True)
    ]
    total = Decimal(0)
    for w in weights:
        total = _CTX.add(total, w)
    cum = Decimal(0)
    cdf: list[int] = []
    probs: list[float] = []
    for w in weights:
        p = _CTX.divide(w, total)
        probs.append(float(p))
        cum = _CTX.add(cum, p)
        cdf.append(min(int(_CTX.multiply(cum, _TWO64)), (1 << 64) - 1))
    invariant(int(lengths.sum()) == top + 1, "runs must cover 0..upper")
    return PercentileTable(
        starts=starts,
        lengths=lengths,
        cdf_u64=np.array(cdf[:-1], dtype=np.uint64),
        probabilities=np.array(probs),
    )


def sample_percentile(table: PercentileTable, words: NDArray[np.uint64]) -> NDArray[np.int64]:
    """Map word pairs (run, offset in run) to candidates; ``len(words)`` must be even."""
    w = np.asarray(words, dtype=np.uint64).reshape(-1, 2)
    run = np.searchsorted(table.cdf_u64, w[:, 0], side="right")
    length = table.lengths[run]
    # offset = floor(w1 · length / 2^64) in exact uint64 arithmetic (length < 2^32):
    # w1 = hi·2^32 + lo ⇒ offset = (hi·length + (lo·length >> 32)) >> 32, no overflow.
    n = length.astype(np.uint64)
    hi, lo = w[:, 1] >> np.uint64(32), w[:, 1] & np.uint64(0xFFFFFFFF)
    offset = ((hi * n + ((lo * n) >> np.uint64(32))) >> np.uint64(32)).astype(np.int64)
    return table.starts[run] + offset


def percentile_tv_bound(upper: int) -> float:
    """Data-independent TV bound of one sampled selection vs the exact EM: (2·upper + 4)·2^-64."""
    return (2 * _check_upper(upper) + 4) * 2.0**-64


def dp_percentile(
    values: NDArray[np.integer],
    *,
    percentile: int,
    epsilon: float,
    upper: int,
    rnd: ReleaseRandomness,
    label: str,
    stage: str,
) -> int:
    """ε-DP choice of the ``percentile``-th value of ``values`` among the candidates 0..upper.

    The exponential mechanism with the rank quality u of :func:`rank_scores` (Δu = max(Q, 100−Q))
    and the base measure μ(v) = 2^(−2·⌊log2(v + 1)⌋) (within a factor 4 of (v + 1)^−2):
    P(v) ∝ μ(v)·exp(ε·u(v)/(2Δu)), sampled exactly (to 2^-64) by inverse CDF from two words of
    the keyed stream ``label``.

    Privacy. μ depends only on v, never on the data, so for neighbours D, D′ the ratio
    P_D(v)/P_D′(v) = exp(ε(u_D(v) − u_D′(v))/(2Δu))·Z_D′/Z_D: μ cancels in the first factor
    and each factor lies in [e^{−ε/2}, e^{ε/2}] (|u_D − u_D′| <= Δu everywhere), so it is ε-DP
    (McSherry–Talwar 2007 allow any base measure). As a function of v the log-ratio is
    ε(u_D − u_D′)/(2Δu) + constant, whose range is an interval of length <= ε: the mechanism is
    ε-bounded-range, hence ε²/8-zCDP (Cesar–Rogers 2021), which ``accounting="tight"`` charges.

    Why the base measure. Above the data maximum the rank score is flat, so with a small ε·n
    the uniform-base mechanism spreads much of its mass over the C(d, k) − max useless large
    candidates (e.g. PUMS 10k, ε_Q = 0.043, k = 3: mean Δ_3 105 for a 99th percentile of 56);
    μ(v) ≈ (v + 1)^−2 makes each octave [2^j − 1, 2^{j+1} − 1) carry half the prior mass of
    the previous one, which removes much of that tail (mean 82.5 there) while its pull below the
    percentile (−2 ln 2 per octave) is small next to the score's slope there (each 1% of
    records above v costs ε·n/200 nats at Q = 99). It is piecewise constant so the exact
    run-based sampler stays exact. Its bias is towards smaller Δ_k (more truncation, less
    noise), never a privacy cost.

    ``upper`` must not depend on the data (e.g. C(number of columns, k)). Empty ``values`` → 0
    (only an empty table has no records, and the pipeline refuses empty tables, so n >= 1 is
    part of the public input domain).
    """
    table = percentile_table(values, percentile=percentile, epsilon=epsilon, upper=upper)
    if np.asarray(values).size == 0:
        return 0
    words = rnd.words(label, 2, stage=stage)
    return int(sample_percentile(table, words)[0])


def dp_percentile_from_histogram(
    histogram: NDArray[np.integer],
    *,
    percentile: int,
    epsilon: float,
    upper: int,
    rnd: ReleaseRandomness,
    label: str,
    stage: str,
) -> int:
    """:func:`dp_percentile` of the values counted by ``histogram`` (value v occurs
    ``histogram[v]`` times): the same mechanism and the same draw, from a histogram that can be
    summed over record partitions before the single draw on the driver."""
    table = percentile_table_from_histogram(
        histogram, percentile=percentile, epsilon=epsilon, upper=upper
    )
    if int(np.asarray(histogram, dtype=np.int64).sum()) == 0:
        return 0
    words = rnd.words(label, 2, stage=stage)
    return int(sample_percentile(table, words)[0])
