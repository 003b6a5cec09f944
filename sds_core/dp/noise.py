"""Exact, reproducible integer noise for every DP stage (discrete Gaussian, discrete Laplace).

A cumulative distribution table (CDT) of the target distribution is built once per scale at
high precision (stdlib ``decimal``), stored as 64-bit fixed point and sampled with
``np.searchsorted`` (or, for large draws, an equivalent compiled bucket-guided search) on
uniform words from the keyed stream :meth:`ReleaseRandomness.words`.
No float noise is ever produced; the only approximation (2^-64 table resolution and the
truncated tails) is bounded by :func:`table_delta` and accounted in the privacy report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Context, Decimal
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from sds_core._jit import HAVE_NUMBA, _jit
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError, invariant

KINDS = ("gaussian", "laplace")
TAIL_EXPONENT = 72  # truncate where the unnormalised weight is <= exp(-72) ~ 2^-104
MAX_TABLE_ENTRIES = 1 << 23
_CTX = Context(prec=60)
_TWO64 = Decimal(1 << 64)
GUIDED_MIN_DRAWS = 4096  # fewer draws: plain searchsorted (the guide costs 2^16 steps)


@dataclass(frozen=True, slots=True)
class NoiseTable:
    """A CDT for one (kind, scale): ``offset + #{i : cdf_u64[i] <= u}`` for a uniform u64 ``u``.

    Attributes:
        kind: ``"gaussian"`` or ``"laplace"``.
        scale: σ (Gaussian) or the Laplace scale b.
        cdf_u64: floor(2^64 · F(offset + i)), non-decreasing, read-only.
        offset: the smallest value the sampler can return (-K).
        tv_per_draw: upper bound on the total-variation distance between one sampled value
            and the exact (untruncated) distribution.
    """

    kind: str
    scale: float
    cdf_u64: NDArray[np.uint64]
    offset: int
    tv_per_draw: float


def _check_scale(name: str, value: float) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise SdsInputError(f"{name} must be a finite number > 0, got {value!r}")
    if value <= 0:
        raise SdsInputError(
            f"{name} must be > 0, got {value!r}; noise with zero scale would release exact counts"
        )
    return float(value)


def _check_size(size: int) -> int:
    if not isinstance(size, int | np.integer) or isinstance(size, bool) or size < 0:
        raise SdsInputError(f"size must be a non-negative integer, got {size!r}")
    return int(size)


def _half_weights(kind: str, scale: float) -> tuple[list[Decimal], Decimal]:
    """Unnormalised weights w_0..w_K (w_x = w_-x) and an upper bound on sum_{x>K} w_x."""
    s = _CTX.create_decimal(repr(scale))
    if kind == "gaussian":
        k_max = max(1, math.ceil(math.sqrt(2 * TAIL_EXPONENT) * scale))
        two_var = _CTX.multiply(2, _CTX.multiply(s, s))
        step = _CTX.exp(_CTX.divide(-1, two_var))  # w_{x+1} / w_x = step * grow^x
        grow = _CTX.multiply(step, step)
    else:
        k_max = max(1, math.ceil(TAIL_EXPONENT * scale))
        step = _CTX.exp(_CTX.divide(-1, s))
        grow = Decimal(1)
    if 2 * k_max + 1 > MAX_TABLE_ENTRIES:
        raise SdsInputError(
            f"{kind} noise scale {scale!r} needs a table of {2 * k_max + 1} entries "
            f"(> {MAX_TABLE_ENTRIES}); use a larger epsilon or a smaller sensitivity"
        )
    weights = [Decimal(1)]
    w, ratio = Decimal(1), step
    for _ in range(k_max):
        w = _CTX.multiply(w, ratio)
        ratio = _CTX.multiply(ratio, grow)
        weights.append(w)
    # the next weight is w * ratio; later ratios only shrink, so a geometric series bounds the tail
    nxt = _CTX.multiply(w, ratio)
    tail = _CTX.divide(nxt, _CTX.subtract(1, ratio))
    return weights, tail


@lru_cache(maxsize=256)
def noise_table(kind: str, scale: float) -> NoiseTable:
    """The cached CDT of the discrete Gaussian (σ = ``scale``) or discrete Laplace (b = ``scale``).

    Args:
        kind: ``"gaussian"`` (P(x) ∝ exp(-x²/2σ²)) or ``"laplace"`` (P(x) ∝ exp(-|x|/b)).
        scale: σ or b, finite and > 0.

    Returns:
        The table with its per-draw total-variation bound.

    Raises:
        SdsInputError: unknown kind, or a scale that is not finite and > 0.
    """
    if kind not in KINDS:
        raise SdsInputError(f"noise kind must be one of {KINDS}, got {kind!r}")
    scale = _check_scale("sigma" if kind == "gaussian" else "scale", scale)
    half, tail = _half_weights(kind, scale)
    k_max = len(half) - 1
    pmf = half[:0:-1] + half  # x = -K..K
    side = Decimal(0)
    for w in half[1:]:
        side = _CTX.add(side, w)
    z = _CTX.add(_CTX.multiply(2, side), half[0])
    cum = Decimal(0)
    cdf_ints: list[int] = []
    tv = Decimal(0)
    prev_int = 0
    for x_index in range(2 * k_max):
        p = _CTX.divide(pmf[x_index], z)
        cum = _CTX.add(cum, p)
        c = min(int(_CTX.multiply(cum, _TWO64)), (1 << 64) - 1)  # floor, clamped below 2^64
        tv = _CTX.add(tv, abs(_CTX.subtract(_CTX.divide(c - prev_int, _TWO64), p)))
        cdf_ints.append(c)
        prev_int = c
    p_last = _CTX.divide(pmf[-1], z)
    tv = _CTX.add(tv, abs(_CTX.subtract(_CTX.divide((1 << 64) - prev_int, _TWO64), p_last)))
    # TV(table, exact) <= TV(table, truncated) + mass the truncation removed (both tails)
    tv_total = float(_CTX.add(_CTX.divide(tv, 2), _CTX.divide(_CTX.multiply(2, tail), z)))
    tv_total += 1e-40  # slack for the 60-digit arithmetic
    cdf = np.array(cdf_ints, dtype=np.uint64)
    invariant(bool(np.all(np.diff(cdf.astype(np.float64)) >= 0)), "noise CDF must be monotone")
    cdf.flags.writeable = False
    return NoiseTable(kind=kind, scale=scale, cdf_u64=cdf, offset=-k_max, tv_per_draw=tv_total)


GUIDE_BITS = 16


@_jit
def cdf_guide(cdf: np.ndarray) -> np.ndarray:
    """guide[b] = #{i : cdf[i] < b·2^48} for b = 0..2^16 (the last entry is len(cdf))."""
    n_buckets = 1 << GUIDE_BITS
    guide = np.empty(n_buckets + 1, dtype=np.int64)
    i = 0
    n = cdf.shape[0]
    for b in range(n_buckets):
        lower = np.uint64(b) << np.uint64(64 - GUIDE_BITS)
        while i < n and cdf[i] < lower:
            i += 1
        guide[b] = i
    guide[n_buckets] = n
    return guide


def _readonly(a: np.ndarray) -> np.ndarray:
    """A read-only view of ``a``."""
    view = a.view()
    view.flags.writeable = False
    return view


def _add_guided_draws(
    cdf: np.ndarray, words: np.ndarray, offset: np.int64, out: NDArray[np.int64]
) -> None:
    """out[t] += offset + searchsorted(cdf, words[t], side="right"), via :func:`cdf_guide`'s
    buckets and :func:`add_guided`.

    numba compiles a kernel once per writability of each argument, so the kernels always get
    read-only views of the table and the words (a release's are read-only already: the noise
    table is frozen, the words come from a digest), whoever calls this.
    """
    table = _readonly(cdf)
    add_guided(table, cdf_guide(table), _readonly(words), offset, out)


def sample_guided(cdf: np.ndarray, words: np.ndarray, offset: np.int64) -> NDArray[np.int64]:
    """offset + searchsorted(cdf, w, side="right") for every word (:func:`_add_guided_draws`).

    All w in bucket b = w >> 48 satisfy guide[b] <= #{cdf <= w} <= guide[b + 1]: the entries
    below guide[b] are < b·2^48 <= w and those from guide[b + 1] on are >= (b + 1)·2^48 > w.
    """
    out = np.zeros(words.shape[0], dtype=np.int64)
    _add_guided_draws(cdf, words, offset, out)
    return out


@_jit
def add_guided(
    cdf: np.ndarray, guide: np.ndarray, words: np.ndarray, offset: np.int64, out: np.ndarray
) -> None:
    """out[t] += offset + searchsorted(cdf, words[t], side="right") for every word t (the
    draws of :func:`sample_guided`, added in place)."""
    shift = np.uint64(64 - GUIDE_BITS)
    for t in range(words.shape[0]):
        w = words[t]
        b = np.int64(w >> shift)
        lo = guide[b]
        hi = guide[b + 1]
        while lo < hi:  # binary search: the bucket may hold many tail entries
            mid = (lo + hi) >> 1
            if cdf[mid] <= w:
                lo = mid + 1
            else:
                hi = mid
        out[t] += offset + lo


def sample_discrete(
    rnd: ReleaseRandomness,
    label: str,
    *,
    cdf_u64: NDArray[np.uint64],
    offset: int,
    size: int,
    stage: str,
) -> NDArray[np.int64]:
    """Sample ``size`` integers from a 64-bit fixed-point CDF with the keyed stream ``label``.

    Value ``offset + i`` is returned with probability (cdf[i] - cdf[i-1]) / 2^64, where
    cdf[-1] = 0 and cdf[len] = 2^64, so the support is offset..offset+len(cdf_u64).

    Args:
        rnd: the release randomness (privacy noise comes only from its keyed words).
        label: the stream label, unique per stage of the release.
        cdf_u64: non-decreasing uint64 array, floor(2^64 · F).
        offset: value of index 0.
        size: number of draws.
        stage: the stage that owns ``label``.

    Returns:
        int64 array of ``size`` draws.
    """
    size = _check_size(size)
    cdf = np.asarray(cdf_u64)
    if cdf.dtype != np.uint64 or cdf.ndim != 1:
        raise SdsInputError(f"cdf_u64 must be a 1-D uint64 array, got {cdf.dtype} ndim={cdf.ndim}")
    words = rnd.words(label, size, stage=stage)
    if HAVE_NUMBA and size >= GUIDED_MIN_DRAWS:  # same values as the searchsorted below
        return sample_guided(cdf, words, np.int64(offset))
    idx = np.searchsorted(cdf, words, side="right")
    return idx.astype(np.int64, copy=False) + np.int64(offset)


def add_discrete(
    rnd: ReleaseRandomness,
    label: str,
    values: NDArray[np.int64],
    *,
    cdf_u64: NDArray[np.uint64],
    offset: int,
    stage: str,
) -> None:
    """Add :func:`sample_discrete`'s ``len(values)`` draws to the int64 ``values`` in place:
    the same words of the same stream in the same order, so ``values`` ends equal to
    ``values + sample_discrete(...)``, without a noise array as large as ``values``.

    Raises:
        SdsInputError: ``values`` not a writable 1-D int64 array, or a bad ``cdf_u64``.
    """
    if values.dtype != np.int64 or values.ndim != 1 or not values.flags.writeable:
        raise SdsInputError(
            f"values must be a writable 1-D int64 array, got {values.dtype} ndim={values.ndim}"
        )
    size = _check_size(values.shape[0])
    cdf = np.asarray(cdf_u64)
    if cdf.dtype != np.uint64 or cdf.ndim != 1:
        raise SdsInputError(f"cdf_u64 must be a 1-D uint64 array, got {cdf.dtype} ndim={cdf.ndim}")
    words = rnd.words(label, size, stage=stage)
    if HAVE_NUMBA and size >= GUIDED_MIN_DRAWS:  # same values as the searchsorted below
        _add_guided_draws(cdf, words, np.int64(offset), values)
        return
    idx = np.searchsorted(cdf, words, side="right")
    values += idx.astype(np.int64, copy=False) + np.int64(offset)


def add_discrete_gaussian(
    rnd: ReleaseRandomness, label: str, values: NDArray[np.int64], *, sigma: float, stage: str
) -> None:
    """``values += discrete_gaussian(rnd, label, sigma=sigma, size=len(values), stage=stage)``
    in place (:func:`add_discrete`: the same draws, no noise array).

    Raises:
        SdsInputError: σ not finite or <= 0, ``values`` not a writable 1-D int64 array.
    """
    table = noise_table("gaussian", _check_scale("sigma", sigma))
    add_discrete(rnd, label, values, cdf_u64=table.cdf_u64, offset=table.offset, stage=stage)


def discrete_gaussian(
    rnd: ReleaseRandomness, label: str, *, sigma: float, size: int, stage: str
) -> NDArray[np.int64]:
    """``size`` iid draws of the discrete Gaussian N_Z(0, σ²): P(x) ∝ exp(-x²/(2σ²)).

    Adding it to an integer vector of L2 sensitivity Δ is Δ²/(2σ²)-zCDP (Canonne, Kamath,
    Steinke 2020, and additivity of Rényi divergence over coordinates).

    Raises:
        SdsInputError: σ not finite or <= 0 (σ = 0 would release exact counts), bad size.
    """
    table = noise_table("gaussian", _check_scale("sigma", sigma))
    return sample_discrete(
        rnd, label, cdf_u64=table.cdf_u64, offset=table.offset, size=size, stage=stage
    )


def discrete_laplace(
    rnd: ReleaseRandomness, label: str, *, scale: float, size: int, stage: str
) -> NDArray[np.int64]:
    """``size`` iid draws of the discrete Laplace (two-sided geometric): P(x) ∝ exp(-|x|/scale).

    Adding it to an integer of L1 sensitivity 1 with ``scale = 1/ε`` is pure ε-DP.

    Raises:
        SdsInputError: scale not finite or <= 0, bad size.
    """
    table = noise_table("laplace", _check_scale("scale", scale))
    return sample_discrete(
        rnd, label, cdf_u64=table.cdf_u64, offset=table.offset, size=size, stage=stage
    )


def tv_bound(kind: str, scale: float) -> float:
    """A data-independent, increasing upper bound on :attr:`NoiseTable.tv_per_draw`.

    The table of ``scale`` s has 2K + 1 points, K = max(1, ⌈√(2·72)·s⌉) = max(1, ⌈12s⌉) for
    the Gaussian (⌈72s⌉ for the Laplace); each point's probability is off by < 2^-64 (two
    floors of the 64-bit CDF), so the table is within (K + ½)·2^-64 of the truncated
    distribution, and the truncated tails weigh < 2^-100. Hence TV ≤ (12s + 2)·2^-64
    (Gaussian) or (72s + 2)·2^-64 (Laplace), about 4 times the exact value; unlike the exact
    value it needs no table and grows with s, so a bound over every scale up to s is its value
    at s.

    >>> tv_bound("gaussian", 7.2) >= noise_table("gaussian", 7.2).tv_per_draw
    True
    """
    if kind not in KINDS:
        raise SdsInputError(f"noise kind must be one of {KINDS}, got {kind!r}")
    per_unit = math.sqrt(2 * TAIL_EXPONENT) if kind == "gaussian" else TAIL_EXPONENT
    return (per_unit * _check_scale("scale", scale) + 2.0) * 2.0**-64


def table_delta(kind: str, scale: float, size: int) -> float:
    """Total-variation bound between ``size`` table draws and ``size`` exact draws.

    The bound is ``size · tv_per_draw`` (TV of product measures is subadditive). A mechanism that
    is (ε, δ)-DP with exact noise is (ε, δ + (1 + e^ε) · table_delta)-DP with the table
    sampler; the privacy report adds that term. It is ~1e-18 per draw at σ ≈ 7.

    Args:
        kind: ``"gaussian"`` or ``"laplace"``.
        scale: σ or the Laplace scale.
        size: number of draws made with this table.
    """
    return _check_size(size) * noise_table(kind, scale).tv_per_draw
