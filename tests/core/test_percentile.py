# ruff: noqa: RUF002  (the DP literature's notation: σ, ρ, ε, −)
"""Tests for sds_core.dp.percentile: R-8 quantile, reference scores, the DP percentile mechanism."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sds_core.dp.percentile import (
    base_measure_octave,
    dp_percentile,
    log_base_measure,
    percentile_table,
    percentile_tv_bound,
    quantile_r8,
    rank_scores,
    reference_scores,
    sample_percentile,
)
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError

SPEC_VECTORS = [
    (
        [0, 1, 4, 5, 5, 8, 11, 12, 12, 15],
        [-5, -4, -4, -4, -3, -1, -1, -1, 0, -1, -1, -1, -3, -3, -3, -4],
    ),
    (
        [15, 1, 4, 5, 7, 8, 11, 12, 13, 0],
        [-5, -4, -4, -4, -3, -2, -2, -1, 0, -1, -1, -1, -2, -3, -3, -4],
    ),
    ([4] * 10, [-6, -6, -6, -6, 0]),
    ([4] * 8 + [5, 5], [-6, -6, -6, -6, 0, -4]),
    (list(range(2, 12)), [-6, -6, -5, -4, -3, -2, -1, 0, -1, -2, -3, -4]),
    ([5, 4], [-2, -2, -2, -2, 0, -1]),
    ([4], [-1, -1, -1, -1, 0]),
    ([], []),
]


@pytest.mark.parametrize(("values", "expected"), SPEC_VECTORS)
def test_reference_scores_reproduce_spec_vectors(values: list[int], expected: list[int]) -> None:
    """The reference rank-distance scores match pac-synth's unit vectors (Q = 60)."""
    assert reference_scores(np.array(values, dtype=np.int64), 60).tolist() == expected


def test_reference_scores_extend_to_upper() -> None:
    """With upper > max the reference rule 'absent ⇒ max(prev, 1)' continues past the max."""
    out = reference_scores(np.array([4]), 60, upper=7)
    assert out.tolist() == [-1, -1, -1, -1, 0, 0 - 1, -1, -1]


def test_reference_scores_are_not_sensitivity_one() -> None:
    """Documented counterexample: adding one record moves a reference score by 5."""
    x = np.array([0, 0, 1, 3, 4, 5, 5, 5, 5, 6])
    a = reference_scores(x, 50)
    b = reference_scores(np.append(x, 5), 50)
    assert np.abs(a - b).max() == 5


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.integers(0, 30), min_size=0, max_size=40),
    q=st.floats(0, 1),
)
def test_quantile_r8_equals_numpy_median_unbiased(values: list[int], q: float) -> None:
    """quantile_r8 equals numpy's median_unbiased estimator (Hyndman–Fan R-8)."""
    if not values:
        with pytest.raises(SdsInputError, match="empty"):
            quantile_r8(np.array(values), q)
        return
    expected = float(np.quantile(np.array(values, float), q, method="median_unbiased"))
    assert quantile_r8(np.array(values), q) == pytest.approx(expected, abs=1e-9)


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(st.integers(0, 12), min_size=0, max_size=25),
    extra=st.integers(0, 15),
    q=st.integers(0, 100),
)
def test_rank_scores_have_sensitivity_max_q(values: list[int], extra: int, q: int) -> None:
    """Adding one record changes every rank score by at most max(Q, 100 − Q)."""
    a = rank_scores(np.array(values, dtype=np.int64), q, upper=14)
    b = rank_scores(np.array([*values, extra], dtype=np.int64), q, upper=14)
    assert np.abs(a - b).max() <= max(q, 100 - q)


def test_rank_scores_peak_at_the_percentile() -> None:
    """The rank score is maximal (0 or nearly) at the non-private percentile."""
    x = np.arange(1, 101)
    s = rank_scores(x, 90, upper=150)
    assert 88 <= int(np.argmax(s)) <= 92


def test_table_probabilities_match_exponential_mechanism() -> None:
    """Per-candidate probabilities equal μ(v)·exp(ε u/(2Δu)) normalised, computed in floats."""
    x = np.array([0, 1, 1, 3, 7, 7, 7, 9])
    eps, q, upper = 1.3, 75, 40
    t = percentile_table(x, percentile=q, epsilon=eps, upper=upper)
    per_cand = np.repeat(t.probabilities / t.lengths, t.lengths)
    cand = np.arange(upper + 1)
    u = rank_scores(x, q, upper).astype(float)
    mu = 4.0 ** -np.floor(np.log2(cand + 1))
    w = mu * np.exp(eps * (u - u.max()) / (2 * max(q, 100 - q)))
    assert per_cand == pytest.approx(w / w.sum(), rel=1e-12)
    assert t.probabilities.sum() == pytest.approx(1.0)


def test_base_measure_is_data_independent_and_decreasing() -> None:
    """μ(v) = 4^-⌊log2(v+1)⌋: same for any data, non-increasing, halving mass per octave."""
    cand = np.arange(0, 2**12 - 1)
    lm = log_base_measure(cand)
    assert np.all(np.diff(lm) <= 0)
    octave_mass = np.bincount(base_measure_octave(cand), weights=np.exp(lm))
    assert octave_mass == pytest.approx(0.5 ** np.arange(12))
    assert base_measure_octave(np.array([2**31 - 2])).tolist() == [30]


@settings(max_examples=100, deadline=None)
@given(
    values=st.lists(st.integers(0, 20), min_size=1, max_size=15),
    extra=st.integers(0, 25),
    q=st.integers(0, 100),
    eps=st.floats(0.05, 3),
)
def test_log_ratio_range_is_at_most_epsilon(
    values: list[int], extra: int, q: int, eps: float
) -> None:
    """On neighbours, ln P_D(v) − ln P_D′(v) spans <= ε over v and stays in [−ε, ε]."""
    upper = 24
    a = percentile_table(np.array(values), percentile=q, epsilon=eps, upper=upper)
    b = percentile_table(np.array([*values, extra]), percentile=q, epsilon=eps, upper=upper)
    pa = np.repeat(a.probabilities / a.lengths, a.lengths)
    pb = np.repeat(b.probabilities / b.lengths, b.lengths)
    lr = np.log(pa) - np.log(pb)
    assert lr.max() - lr.min() <= eps * (1 + 1e-9)
    assert np.abs(lr).max() <= eps * (1 + 1e-9)


def test_base_measure_reduces_over_selection_above_the_maximum() -> None:
    """Small ε·n, wide range: far less mass above the data maximum than a uniform base."""
    x = np.concatenate([np.random.default_rng(7).integers(0, 40, 9900), np.full(100, 60)])
    eps, upper = 0.05, 165
    t = percentile_table(x, percentile=99, epsilon=eps, upper=upper)
    per_cand = np.repeat(t.probabilities / t.lengths, t.lengths)
    u = rank_scores(x, 99, upper).astype(float)
    flat = np.exp(eps * (u - u.max()) / 198)
    flat /= flat.sum()
    above = slice(int(x.max()) + 1, None)
    assert per_cand[above].sum() < 0.6 * flat[above].sum()
    mean_ours = per_cand @ np.arange(upper + 1)
    assert mean_ours < flat @ np.arange(upper + 1)


def test_sampler_distribution_matches_table() -> None:
    """4·10^5 vectorised selections match the exact EM probabilities (chi-square p > 1e-6)."""
    from scipy import stats

    x = np.array([2, 3, 3, 5, 8, 8, 9, 13])
    t = percentile_table(x, percentile=60, epsilon=2.0, upper=40)
    words = ReleaseRandomness.from_seed(5).words("em", 800_000, stage="audit")
    draws = sample_percentile(t, words)
    obs = np.bincount(draws, minlength=41)
    expected = np.repeat(t.probabilities / t.lengths, t.lengths) * len(draws)
    assert obs.sum() == len(draws) and obs.size == 41
    assert stats.chisquare(obs, expected).pvalue > 1e-6


def test_dp_percentile_is_reproducible_and_in_range() -> None:
    """Same key + label ⇒ same choice; the choice lies in 0..upper; empty input ⇒ 0."""
    x = np.random.default_rng(1).integers(0, 10, 500)
    kw = {"percentile": 99, "epsilon": 0.5, "upper": 45, "stage": "aggregate-2"}
    a = dp_percentile(x, rnd=ReleaseRandomness.from_seed(3), label="rel/pct/2", **kw)
    b = dp_percentile(x, rnd=ReleaseRandomness.from_seed(3), label="rel/pct/2", **kw)
    assert a == b and 0 <= a <= 45
    empty = np.zeros(0, dtype=np.int64)
    assert dp_percentile(empty, rnd=ReleaseRandomness.from_seed(3), label="e", **kw) == 0


def test_dp_percentile_is_accurate_at_large_epsilon() -> None:
    """With ε = 20 on 2000 records the selection is the true 90th percentile ± 1."""
    x = np.random.default_rng(2).integers(0, 50, 2000)
    truth = math.floor(quantile_r8(x, 0.9))
    rnd = ReleaseRandomness.from_seed(4)
    picks = [
        dp_percentile(x, percentile=90, epsilon=20.0, upper=100, rnd=rnd, label=f"p{i}", stage="s")
        for i in range(20)
    ]
    assert all(abs(p - truth) <= 1 for p in picks)


def test_percentile_tv_bound_is_negligible() -> None:
    """The sampled EM is within (2·upper+4)·2^-64 of the exact EM in total variation."""
    assert percentile_tv_bound(210) < 1e-16


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"percentile": 101}, "percentile must be in 0..100"),
        ({"percentile": 99.5}, "percentile must be an integer"),
        ({"epsilon": 0.0}, "percentile epsilon must be"),
        ({"epsilon": math.inf}, "percentile epsilon must be"),
        ({"upper": -1}, "upper must be an integer"),
        ({"upper": 2**40}, "upper must be an integer"),
    ],
)
def test_bad_inputs_raise(kwargs: dict[str, object], match: str) -> None:
    """Bad percentile, ε or upper raise SdsInputError naming the parameter."""
    base = {"percentile": 99, "epsilon": 1.0, "upper": 10}
    with pytest.raises(SdsInputError, match=match):
        dp_percentile(
            np.array([1, 2]),
            rnd=ReleaseRandomness.from_seed(0),
            label="x",
            stage="s",
            **{**base, **kwargs},  # type: ignore[arg-type]
        )


@pytest.mark.parametrize("seed", range(6))
def test_histogram_percentile_equals_the_values_percentile(seed: int) -> None:
    """The DP percentile from a histogram of the values is the same table and the same draw."""
    from sds_core.dp.percentile import dp_percentile_from_histogram, percentile_table_from_histogram

    rng = np.random.default_rng(seed)
    values = rng.integers(0, 40, rng.integers(1, 300))
    upper = int(rng.integers(0, 60))
    a = percentile_table(values, percentile=95, epsilon=0.7, upper=upper)
    b = percentile_table_from_histogram(
        np.bincount(values), percentile=95, epsilon=0.7, upper=upper
    )
    assert np.array_equal(a.starts, b.starts) and np.array_equal(a.cdf_u64, b.cdf_u64)
    kw = {"percentile": 95, "epsilon": 0.7, "upper": upper, "label": "q", "stage": "s"}
    assert dp_percentile(
        values, rnd=ReleaseRandomness.from_seed(seed), **kw
    ) == dp_percentile_from_histogram(
        np.bincount(values), rnd=ReleaseRandomness.from_seed(seed), **kw
    )
