"""Tests for sds_core.dp.noise: exact CDT samplers for the discrete Gaussian and discrete
Laplace."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from sds_core.dp.noise import (
    discrete_gaussian,
    discrete_laplace,
    noise_table,
    sample_discrete,
    table_delta,
)
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError


def _rnd(seed: int = 7) -> ReleaseRandomness:
    return ReleaseRandomness.from_seed(seed)


def _exact_pmf(kind: str, scale: float, support: np.ndarray) -> np.ndarray:
    if kind == "gaussian":
        big = np.arange(-40 * math.ceil(scale) - 40, 40 * math.ceil(scale) + 41)
        w = np.exp(-(big.astype(float) ** 2) / (2 * scale**2))
    else:
        big = np.arange(-120 * math.ceil(scale) - 40, 120 * math.ceil(scale) + 41)
        w = np.exp(-np.abs(big.astype(float)) / scale)
    p = w / w.sum()
    return p[np.searchsorted(big, support)]


def _chi2_pvalue(draws: np.ndarray, kind: str, scale: float) -> float:
    """Chi-square of draws against the exact PMF, tail cells pooled to expected >= 20."""
    values, counts = np.unique(draws, return_counts=True)
    lo, hi = int(values.min()), int(values.max())
    support = np.arange(lo - 1, hi + 2)
    obs = np.zeros(len(support))
    obs[values - (lo - 1)] = counts
    expected = _exact_pmf(kind, scale, support) * len(draws)
    expected[0] += len(draws) - expected.sum()  # pool the mass outside into one cell, split below
    # pool cells from both ends until expected >= 20
    keep_obs, keep_exp, acc_o, acc_e = [], [], 0.0, 0.0
    order = np.argsort(np.abs(support), kind="stable")[::-1]
    for i in order:
        acc_o += obs[i]
        acc_e += expected[i]
        if acc_e >= 20:
            keep_obs.append(acc_o)
            keep_exp.append(acc_e)
            acc_o = acc_e = 0.0
    keep_obs[-1] += acc_o
    keep_exp[-1] += acc_e
    return float(
        stats.chisquare(keep_obs, np.array(keep_exp) * sum(keep_obs) / sum(keep_exp)).pvalue
    )


def test_same_key_and_label_give_identical_noise() -> None:
    """Same key + label reproduces the noise; another label gives a different stream."""
    a = discrete_gaussian(_rnd(), "rel/agg/2", sigma=5.0, size=1000, stage="aggregate-2")
    b = discrete_gaussian(_rnd(), "rel/agg/2", sigma=5.0, size=1000, stage="aggregate-2")
    c = discrete_gaussian(_rnd(), "rel/agg/3", sigma=5.0, size=1000, stage="aggregate-2")
    assert a.dtype == np.int64
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_label_reused_for_another_stage_raises() -> None:
    """A noise label belongs to one stage; reusing it for another stage raises."""
    rnd = _rnd()
    discrete_laplace(rnd, "rel/count", scale=50.0, size=1, stage="count")
    with pytest.raises(SdsInputError, match="already used by stage"):
        discrete_gaussian(rnd, "rel/count", sigma=3.0, size=5, stage="aggregate-1")


@pytest.mark.parametrize("bad", [0, 0.0, -1.0, math.nan, math.inf, "3"])
def test_bad_sigma_or_scale_raises(bad: object) -> None:
    """σ or scale that is zero, negative, non-finite or not a number raises SdsInputError."""
    with pytest.raises(SdsInputError, match="sigma must be"):
        discrete_gaussian(_rnd(), "x", sigma=bad, size=3, stage="s")  # type: ignore[arg-type]
    with pytest.raises(SdsInputError, match="scale must be"):
        discrete_laplace(_rnd(), "y", scale=bad, size=3, stage="s")  # type: ignore[arg-type]


def test_bad_size_and_kind_raise() -> None:
    """Negative size, unknown kind and a non-uint64 CDF raise SdsInputError."""
    with pytest.raises(SdsInputError, match="size must be"):
        discrete_gaussian(_rnd(), "x", sigma=1.0, size=-1, stage="s")
    with pytest.raises(SdsInputError, match="noise kind"):
        table_delta("cauchy", 1.0, 3)
    with pytest.raises(SdsInputError, match="uint64"):
        sample_discrete(_rnd(), "z", cdf_u64=np.array([1.0]), offset=0, size=1, stage="s")  # type: ignore[arg-type]


def test_tiny_sigma_gives_zero_noise() -> None:
    """σ → 0 ⇒ noisy == exact: at σ = 1e-3 every draw is 0."""
    exact = np.arange(50, dtype=np.int64)
    noisy = exact + discrete_gaussian(_rnd(), "t", sigma=1e-3, size=50, stage="s")
    assert np.array_equal(noisy, exact)
    assert np.all(discrete_laplace(_rnd(), "u", scale=1e-3, size=50, stage="s") == 0)


def test_zero_size_returns_empty() -> None:
    """size = 0 returns an empty int64 array."""
    out = discrete_laplace(_rnd(), "e", scale=2.0, size=0, stage="s")
    assert out.shape == (0,) and out.dtype == np.int64


def test_table_is_symmetric_and_monotone() -> None:
    """The CDT is non-decreasing, covers ±12σ and is symmetric: F(-x-1) + F(x) = 1 within 2^-64."""
    t = noise_table("gaussian", 3.7)
    assert t.offset <= -12 * 3.7
    cdf = t.cdf_u64.astype(object)
    assert all(a <= b for a, b in itertools.pairwise(cdf))
    n = len(cdf)  # entries F(-K)..F(K-1)
    for i in range(n):
        assert abs(cdf[i] + cdf[n - 1 - i] - 2**64) <= 2


def test_sample_discrete_generic_two_point() -> None:
    """The generic sampler returns offset + index with the CDF's probabilities (fair coin)."""
    draws = sample_discrete(
        _rnd(), "coin", cdf_u64=np.array([2**63], dtype=np.uint64), offset=10, size=20000, stage="s"
    )
    assert set(np.unique(draws)) == {10, 11}
    assert abs(draws.mean() - 10.5) < 0.02


@pytest.mark.parametrize(
    ("kind", "scale"), [("gaussian", 0.8), ("gaussian", 7.18), ("laplace", 1.0), ("laplace", 6.0)]
)
def test_goodness_of_fit_against_exact_pmf(kind: str, scale: float) -> None:
    """Chi-square of 2e5 draws against the exact PMF does not reject (p > 1e-6)."""
    f = discrete_gaussian if kind == "gaussian" else discrete_laplace
    kw = {"sigma": scale} if kind == "gaussian" else {"scale": scale}
    draws = f(_rnd(11), f"gof/{kind}/{scale}", size=200_000, stage="gof", **kw)
    assert _chi2_pvalue(draws, kind, scale) > 1e-6


@pytest.mark.parametrize("factor", [0.7, 1.3])
@pytest.mark.parametrize(("kind", "scale"), [("gaussian", 7.18), ("laplace", 6.0)])
def test_goodness_of_fit_rejects_wrong_scale(kind: str, scale: float, factor: float) -> None:
    """The same chi-square test rejects (p < 1e-20) a sampler whose scale is off by ±30%."""
    f = discrete_gaussian if kind == "gaussian" else discrete_laplace
    kw = {"sigma": scale * factor} if kind == "gaussian" else {"scale": scale * factor}
    draws = f(_rnd(12), f"bad/{kind}/{factor}", size=200_000, stage="gof", **kw)
    assert _chi2_pvalue(draws, kind, scale) < 1e-20


def test_moments_match_theory() -> None:
    """Discrete Laplace variance is 2q/(1-q)^2; discrete Gaussian variance is ≈ σ² for σ ≥ 1."""
    b = 4.0
    q = math.exp(-1 / b)
    lap = discrete_laplace(_rnd(3), "m/lap", scale=b, size=400_000, stage="m")
    assert lap.var() == pytest.approx(2 * q / (1 - q) ** 2, rel=0.02)
    gau = discrete_gaussian(_rnd(3), "m/gau", sigma=5.0, size=400_000, stage="m")
    assert gau.var() == pytest.approx(25.0, rel=0.02)
    assert abs(gau.mean()) < 0.05


def test_table_delta_is_tiny_and_linear_in_size() -> None:
    """The table's TV bound is below 1e-16 per draw at σ=7 and scales linearly with draws."""
    one = table_delta("gaussian", 7.18, 1)
    assert 0 < one < 1e-16
    assert table_delta("gaussian", 7.18, 10**6) == pytest.approx(10**6 * one)
    assert table_delta("laplace", 50.0, 1) < 1e-15
    assert table_delta("laplace", 50.0, 0) == 0.0


def test_guided_sampler_equals_searchsorted_on_edge_words() -> None:
    """The bucket-guided CDT lookup returns searchsorted(side="right") for every word."""
    from sds_core.dp.noise import sample_guided

    top = np.uint64((1 << 64) - 1)
    tables = [noise_table("gaussian", s).cdf_u64 for s in (0.4, 7.0, 300.0)]
    tables.append(noise_table("laplace", 2.0).cdf_u64)
    crowded = np.sort(
        np.concatenate(
            [
                np.arange(0, 5000, dtype=np.uint64),  # thousands of entries in bucket 0
                np.full(7, 1 << 63, dtype=np.uint64),  # repeated values
                top - np.arange(0, 3000, dtype=np.uint64)[::-1],  # and in the last bucket
            ]
        )
    )
    tables.append(crowded)
    rng = np.random.default_rng(2)
    for cdf in tables:
        words = np.concatenate(
            [
                rng.integers(0, 1 << 63, 20_000, dtype=np.uint64) * np.uint64(2),
                cdf,
                cdf - np.uint64(1),
                cdf + np.uint64(1),  # wraps around at 2^64 - 1: still a valid word
                np.array([0, 1, top, top - np.uint64(1), 1 << 48, (1 << 48) - 1], dtype=np.uint64),
            ]
        )
        got = sample_guided(cdf, words, np.int64(-11))
        want = np.searchsorted(cdf, words, side="right").astype(np.int64) - 11
        assert np.array_equal(got, want)


def test_sample_discrete_compiled_and_numpy_paths_agree(monkeypatch) -> None:
    """Large draws (compiled guide) equal the numpy searchsorted draws for the same words."""
    from sds_core.dp import noise

    table = noise_table("gaussian", 5.0)
    kw = {"cdf_u64": table.cdf_u64, "offset": table.offset, "size": 50_000, "stage": "s"}
    a = sample_discrete(_rnd(3), "x", **kw)
    monkeypatch.setattr(noise, "HAVE_NUMBA", False)
    b = sample_discrete(_rnd(3), "x", **kw)
    assert np.array_equal(a, b) and a.dtype == b.dtype == np.int64
