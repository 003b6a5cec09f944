"""Tests of the marginal-histogram synthesizers against the Programming-DP chapter."""

from __future__ import annotations

import math

import numpy as np
import pytest
from synth_helpers import column_frequencies, make_table, pums_table

from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError
from sds_core.synthesizers import create
from sds_core.synthesizers.histogram import Histogram1Way, HistogramNWay, stability_threshold


def _ages(n_values: int = 60, n: int = 3000) -> dict[str, list[str | None]]:
    rng = np.random.default_rng(0)
    ages = rng.integers(0, n_values, n)
    return {"age": [f"{a:03d}" for a in ages]}


def test_budget_adds_up_1way() -> None:
    """Count + one marginal per column add up to (ε, δ) exactly."""
    synth = Histogram1Way(columns=("a", "b", "c"), number_of_records_epsilon_proportion=0.1)
    spends = synth.budget(2.0, 1e-6)
    assert [s.stage for s in spends] == [
        "histogram-1way/count",
        "histogram-1way/marginal/a",
        "histogram-1way/marginal/b",
        "histogram-1way/marginal/c",
    ]
    assert math.isclose(sum(s.epsilon for s in spends), 2.0)
    assert math.isclose(sum(s.delta for s in spends), 1e-6)
    assert math.isclose(spends[0].epsilon, 0.2)
    assert spends[0].rho == pytest.approx(0.02)


def test_budget_adds_up_nway_and_matches_fit() -> None:
    """n-way budget: count + joint marginal + 1-way for others; fit spends exactly that."""
    table = make_table({"a": ["x", "y"] * 50, "b": ["u", "v", "v", "u"] * 25, "c": ["k"] * 100})
    synth = HistogramNWay(columns=("a", "b", "c"), marginal_columns=("a", "b"), public_domain=True)
    spends = synth.budget(1.0, None)
    assert [s.stage for s in spends][1:] == [
        "histogram-nway/marginal/a+b",
        "histogram-nway/marginal/c",
    ]
    assert math.isclose(sum(s.epsilon for s in spends), 1.0)
    assert sum(s.delta for s in spends) == 0
    fit = synth.fit(
        table, epsilon=1.0, delta=None, rnd=ReleaseRandomness.from_seed(1), release_label="r"
    )
    assert fit.spends == spends
    assert math.isclose(fit.epsilon, 1.0)


@pytest.mark.parametrize("eps", [0, -1, float("nan"), float("inf")])
def test_bad_epsilon_raises(eps: float) -> None:
    """ε must be finite and > 0."""
    with pytest.raises(SdsInputError, match="epsilon must be a finite number > 0"):
        Histogram1Way(columns=("a",)).budget(eps, 1e-6)


def test_unknown_column_and_missing_delta_raise() -> None:
    """Unknown column names the known ones; thresholded mode needs a δ."""
    table = make_table({"a": ["x", "y"]})
    with pytest.raises(SdsInputError, match="unknown column 'zz'"):
        Histogram1Way(columns=("zz",)).fit(
            table, epsilon=1.0, delta=1e-6, rnd=ReleaseRandomness.from_seed(0), release_label="r"
        )
    with pytest.raises(SdsInputError, match="delta must be in"):
        Histogram1Way(columns=("a",)).budget(1.0, None)
    with pytest.raises(SdsInputError, match="pass columns"):
        Histogram1Way().budget(1.0, 1e-6)
    with pytest.raises(SdsInputError, match="at least 2 distinct"):
        HistogramNWay(columns=("a",), marginal_columns=("a",))


def test_nway_too_large_table_names_size() -> None:
    """A public-domain joint histogram above max_cells fails with its size, before noising."""
    table = make_table({"a": [str(i) for i in range(300)], "b": [str(i) for i in range(300)]})
    synth = HistogramNWay(
        columns=("a", "b"), marginal_columns=("a", "b"), public_domain=True, max_cells=10_000
    )
    with pytest.raises(SdsInputError, match=r"9\.060e\+04 cells"):
        synth.fit(
            table, epsilon=1.0, delta=None, rnd=ReleaseRandomness.from_seed(0), release_label="r"
        )


def test_range_query_noise_grows_with_width() -> None:
    """Chapter: range queries on the DP histogram sum per-bin noise, so error grows with width."""
    table = make_table(_ages())
    eps = 0.5
    q = math.exp(-eps / 0.95)  # per-marginal ε after the 5 % count share
    var1 = 2 * q / (1 - q) ** 2
    j = 0
    exact = np.bincount(table.codes[:, j], minlength=60)
    err1, err40 = [], []
    for seed in range(300):
        synth = Histogram1Way(columns=("age",), public_domain=True)
        fit = synth.fit(
            table, epsilon=eps, delta=None, rnd=ReleaseRandomness.from_seed(seed), release_label="r"
        )
        marg = fit.model.marginals[0]
        err1.append(marg.range_count(30, 31) - exact[30:31].sum())
        err40.append(marg.range_count(10, 50) - exact[10:50].sum())
    v1, v40 = np.var(err1), np.var(err40)
    assert v1 == pytest.approx(var1, rel=0.25)
    assert v40 / v1 == pytest.approx(40, rel=0.35)
    assert abs(np.mean(err40)) < 3 * math.sqrt(v40 / 300) + 1e-9


def test_huge_epsilon_reproduces_1way_marginals() -> None:
    """With ε = 1e6 the DP count is exact and synthetic 1-way shares match the data."""
    data = _ages(20, 2000)
    data["sex"] = ["F" if i % 3 else "M" for i in range(2000)]
    data["opt"] = [None if i % 4 == 0 else "y" for i in range(2000)]
    table = make_table(data)
    for public in (True, False):
        synth = create("histogram-1way", columns=("age", "sex", "opt"), public_domain=public)
        synth.fit(
            table, epsilon=1e6, delta=1e-6, rnd=ReleaseRandomness.from_seed(3), release_label="r"
        )
        assert synth.sample(None, rng=np.random.default_rng(0)).n_records == 2000
        syn = synth.sample(100_000, rng=np.random.default_rng(1))
        for col in ("age", "sex", "opt"):
            want, got = column_frequencies(table, col), column_frequencies(syn, col)
            assert set(got) == set(want)
            for k, v in want.items():
                assert got[k] == pytest.approx(v, abs=0.01)


def test_nway_keeps_joint_distribution() -> None:
    """The n-way marginal is sampled jointly: a deterministic a->b relation survives."""
    a = [str(i % 5) for i in range(1000)]
    table = make_table({"a": a, "b": [f"b{x}" for x in a], "c": ["u", "v"] * 500})
    synth = HistogramNWay(columns=("a", "b", "c"), marginal_columns=("a", "b"))
    synth.fit(
        table, epsilon=50.0, delta=1e-6, rnd=ReleaseRandomness.from_seed(5), release_label="r"
    )
    syn = synth.sample(5000, rng=np.random.default_rng(2))
    la, lb = syn.domain.labels[0], syn.domain.labels[1]
    pairs = {(la[x], lb[y]) for x, y in syn.codes[:, :2].tolist()}
    assert pairs == {(str(i), f"b{i}") for i in range(5)}


def test_stability_threshold_is_minimal_and_hides_rare_values() -> None:
    """P(1+Z ≥ t) ≤ δ < P(1+Z ≥ t-1); a value held by one record is not released."""
    for eps, delta in [(1.0, 1e-6), (0.1, 1e-5), (3.0, 1e-9)]:
        t = stability_threshold(eps, delta)
        q = math.exp(-eps)
        # P(Z >= s) = q**s / (1 + q) for s >= 1
        assert q ** (t - 1) / (1 + q) <= delta
        assert t == 2 or q ** (t - 2) / (1 + q) > delta
    table = make_table({"a": ["common"] * 500 + ["rare"]})
    synth = Histogram1Way(columns=("a",))
    fit = synth.fit(
        table, epsilon=2.0, delta=1e-6, rnd=ReleaseRandomness.from_seed(0), release_label="r"
    )
    assert fit.model.domain.labels == (("common",),)
    assert fit.privacy_report["stability_threshold"] == stability_threshold(1.9, 1e-6)


def test_pums_histogram_runs(shared_data) -> None:
    """End to end on PUMS: every synthetic column uses only labels of the DP domain."""
    table = pums_table(shared_data)
    synth = create("histogram-1way", columns=table.domain.columns)
    fit = synth.fit(
        table, epsilon=1.0, delta=1e-6, rnd=ReleaseRandomness.from_seed(0), release_label="r"
    )
    syn = synth.sample(None, rng=np.random.default_rng(0))
    assert abs(syn.n_records - 1000) < 200
    assert fit.model.as_dict()["dp_count"] == syn.n_records
    assert syn.domain.columns == table.domain.columns
