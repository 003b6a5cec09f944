"""Tests of the ε-DP Dirichlet-multinomial synthesizer against Hu's slides."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from synth_helpers import column_frequencies, make_table, pums_table

from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError
from sds_core.synthesizers import create
from sds_core.synthesizers.dirichlet import (
    DirichletMultinomial,
    alpha_min,
    log_posterior_predictive,
)

RACE = [816, 109, 7, 39, 6, 17]


def _race_table() -> object:
    values = [str(i + 1) for i, c in enumerate(RACE) for _ in range(c)]
    return make_table({"Race": values})


def _compositions(total: int, parts: int):
    """All count vectors of ``parts`` cells summing to ``total``."""
    for bars in itertools.combinations(range(total + parts - 1), parts - 1):
        edges = (-1, *bars, total + parts - 1)
        yield np.array([edges[i + 1] - edges[i] - 1 for i in range(parts)], dtype=np.int64)


def _max_log_ratio(y, x, m: int, alpha: float) -> float:
    a = np.full(len(y), alpha)
    return max(
        abs(log_posterior_predictive(s, y, a) - log_posterior_predictive(s, x, a))
        for s in _compositions(m, len(y))
    )


def test_alpha_min_race_example() -> None:
    """Slides: race counts at ε=5 give alpha_min ≈ 6.742953."""
    assert alpha_min(sum(RACE), 5.0) == pytest.approx(6.742953, abs=5e-7)


def test_fit_uses_alpha_min_with_public_total() -> None:
    """With the source's public total, fit uses alpha_min = n/(e^ε-1) and y* sums to n."""
    synth = DirichletMultinomial(columns=("Race",), public_total=True, public_domain=True)
    fit = synth.fit(
        _race_table(),
        epsilon=5.0,
        delta=None,
        rnd=ReleaseRandomness.from_seed(123),
        release_label="r",
    )
    assert fit.privacy_report["alpha"] == pytest.approx(6.742953, abs=5e-7)
    assert fit.model.total == sum(RACE) and int(fit.model.counts.sum()) == sum(RACE)
    assert fit.spends[0].mechanism.startswith("public-total")
    assert math.isclose(fit.epsilon, 5.0)
    syn = synth.sample(None, rng=np.random.default_rng(0))
    assert syn.n_records == sum(RACE)
    # utility roughly as on the slides: the big category stays dominant
    assert column_frequencies(syn, "Race")["1"] > 0.6


@pytest.mark.parametrize("parts,m,eps", [(3, 4, 1.0), (4, 3, 0.5), (2, 6, 2.0)])
def test_privacy_inequality_replacement_neighbours(parts: int, m: int, eps: float) -> None:
    """Exact posterior predictive ratio ≤ e^ε for same-total neighbours at alpha_min, tight."""
    a = alpha_min(m, eps)
    worst = 0.0
    for y in _compositions(m, parts):
        for i, j in itertools.permutations(range(parts), 2):
            if y[i] == 0:
                continue
            x = y.copy()
            x[i] -= 1
            x[j] += 1
            worst = max(worst, _max_log_ratio(y, x, m, a))
    assert worst <= eps + 1e-9
    assert worst == pytest.approx(eps, abs=1e-9)  # the bound of the slides is attained
    y = np.zeros(parts, dtype=np.int64)
    y[0] = m
    x = y.copy()
    x[0] -= 1
    x[1] += 1
    assert _max_log_ratio(x, y, m, 0.9 * a) > eps  # a smaller prior breaks it


@pytest.mark.parametrize("parts,m,eps", [(3, 4, 1.0), (2, 5, 0.3)])
def test_privacy_inequality_add_remove_neighbours(parts: int, m: int, eps: float) -> None:
    """With a fixed synthetic total m (the DP count), adding a record changes p(y*) by ≤ e^ε."""
    a = alpha_min(m, eps)
    worst = 0.0
    for n in range(0, m + 2):
        for y in _compositions(n, parts):
            for i in range(parts):
                x = y.copy()
                x[i] += 1
                worst = max(worst, _max_log_ratio(y, x, m, a))
    assert worst <= eps + 1e-9


def test_default_spends_dp_count_and_labels() -> None:
    """Default budget: DP count + per-column label selection + posterior, adding up to (ε, δ)."""
    synth = create("dirichlet-multinomial", columns=("a", "b"))
    spends = synth.budget(2.0, 1e-6)
    assert [s.stage for s in spends] == [
        "dirichlet-multinomial/count",
        "dirichlet-multinomial/domain/a",
        "dirichlet-multinomial/domain/b",
        "dirichlet-multinomial/posterior",
    ]
    assert math.isclose(sum(s.epsilon for s in spends), 2.0)
    assert math.isclose(sum(s.delta for s in spends), 1e-6)
    table = make_table({"a": ["x", "y", "y"] * 300 + ["rare"], "b": ["u", "v", "w"] * 300 + ["u"]})
    fit = synth.fit(
        table, epsilon=2.0, delta=1e-6, rnd=ReleaseRandomness.from_seed(0), release_label="r"
    )
    assert fit.spends == spends
    assert "rare" not in fit.model.domain.labels[0]
    syn = synth.sample(None, rng=np.random.default_rng(0))
    assert syn.n_records == fit.model.total
    assert abs(fit.model.total - 901) < 60


def test_bad_inputs() -> None:
    """ε ≤ 0, unknown column, alpha below the minimum and huge tables are refused clearly."""
    table = make_table(
        {"a": [str(i) for i in range(4000)], "b": [str(i % 3000) for i in range(4000)]}
    )
    rnd = ReleaseRandomness.from_seed(0)
    with pytest.raises(SdsInputError, match="epsilon must be a finite number > 0"):
        DirichletMultinomial(columns=("a",)).budget(0.0, 1e-6)
    with pytest.raises(SdsInputError, match="unknown column 'nope'"):
        DirichletMultinomial(columns=("nope",), public_domain=True).fit(
            table, epsilon=1.0, delta=None, rnd=rnd, release_label="r"
        )
    with pytest.raises(SdsInputError, match=r"1\.201e\+07 cells"):
        DirichletMultinomial(columns=("a", "b"), public_domain=True).fit(
            table, epsilon=1.0, delta=None, rnd=rnd, release_label="r1"
        )
    with pytest.raises(SdsInputError, match=r"alpha=0\.01 is below"):
        DirichletMultinomial(columns=("b",), public_domain=True, public_total=True, alpha=0.01).fit(
            table, epsilon=1.0, delta=None, rnd=rnd, release_label="r2"
        )


def test_large_epsilon_reproduces_table(shared_data) -> None:
    """At a large ε the synthetic 2-way table of PUMS sex x married is close to the original."""
    table = pums_table(shared_data, ["sex", "married"])
    synth = DirichletMultinomial(columns=("sex", "married"), public_domain=True)
    synth.fit(
        table, epsilon=30.0, delta=None, rnd=ReleaseRandomness.from_seed(9), release_label="r"
    )
    syn = synth.sample(None, rng=np.random.default_rng(0))
    assert abs(syn.n_records - 1000) <= 3
    for col in ("sex", "married"):
        want, got = column_frequencies(table, col), column_frequencies(syn, col)
        for k, v in want.items():
            assert got.get(k, 0.0) == pytest.approx(v, abs=0.06)
