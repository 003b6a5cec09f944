"""Tests of declared domains, CatHist's Algorithm 1 and the declared SDS 1-tuple step."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

from sds_core.data.domain import Domain
from sds_core.dp import noise
from sds_core.dp.declared import (
    DeclaredDomain,
    cathist_histogram,
    cathist_tau,
    cathist_threshold,
    declared_one_tuples,
    fidelity,
    inclusion_probability,
    sample_inactive,
)
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({}, "needs values"),
        ({"values": ("a", "a")}, "unique non-empty"),
        ({"values": ("a", "")}, "unique non-empty"),
        ({"values": "ab"}, "must be a list"),
        ({"values": ("a", "b", "c"), "size": 2}, "size of column 'c' must be an integer >="),
        ({"size": 0}, "must be an integer"),
        ({"size": 5, "label_prefix": ""}, "label_prefix"),
    ],
)
def test_declared_domain_validation(kwargs: dict, match: str) -> None:
    """Every DeclaredDomain validator names the column and the rule."""
    with pytest.raises(SdsInputError, match=match):
        DeclaredDomain("c", **kwargs)


def test_generated_labels_round_trip_at_1e10() -> None:
    """Generated labels of a 10^10 domain are fixed-width and map back to their index."""
    d = DeclaredDomain("w", values=("x", "y"), size=10**10)
    idx = [0, 1, 2, 12345, 10**10 - 1]
    labels = [d.label(i) for i in idx]
    assert labels[2] == "unseen-0000000000" and labels[-1] == "unseen-9999999997"
    assert d.index_of(labels).tolist() == idx
    assert d.index_of(["unseen-123", "z", "unseen-9999999998"]).tolist() == [-1, -1, -1]


@pytest.mark.parametrize("n,rho,eps", [(171_000, 0.9, 0.1), (2.94e10, 0.5, 1.0), (50, 0.1, 0.01)])
def test_tau_matches_paper_formula(n: float, rho: float, eps: float) -> None:
    """τ = -ln(2(1-rho^(1/n)))/ε, and rho = (1 - ½ e^{-ετ})^n as in the paper."""
    n = int(n)
    tau = cathist_tau(n, rho, eps)
    # the naive formula loses digits in 1 - rho**(1/n) for huge n, hence rel=1e-4
    assert tau == pytest.approx(-math.log(2 * (1 - rho ** (1 / n))) / eps, rel=1e-4)
    assert (1 - 0.5 * math.exp(-eps * tau)) ** n == pytest.approx(rho, rel=1e-4)


@pytest.mark.parametrize("n,rho,eps", [(171_000, 0.9, 0.1), (10**10, 0.5, 1.0), (500, 0.2, 0.3)])
def test_discrete_threshold_is_minimal_and_honours_rho(n: int, rho: float, eps: float) -> None:
    """The integer threshold keeps P(no random value) ≥ rho and is the smallest that does."""
    t = cathist_threshold(n, rho, eps)
    assert (1 - inclusion_probability(t, eps)) ** n >= rho
    assert t == 1 or (1 - inclusion_probability(t - 1, eps)) ** n < rho
    assert abs(t - cathist_tau(n, rho, eps)) < 1 + math.log(2) / eps  # close to the paper's τ


def test_inclusion_probability_matches_simulation() -> None:
    """Analytic CatHist (Binomial + tail) ≡ noising every inactive value and thresholding."""
    dec = DeclaredDomain("c", size=400)
    eps, rho = 0.4, 0.05
    t = cathist_threshold(400, rho, eps)
    p = inclusion_probability(t, eps)
    rnd = ReleaseRandomness.from_seed(11)
    active = np.array([3, 7], dtype=np.int64)
    ks, extra = [], []
    for r in range(1500):
        h = cathist_histogram(
            dec,
            active,
            np.array([500, 400]),
            epsilon=eps,
            rho=rho,
            rnd=rnd,
            label=f"a{r}",
            stage="s",
        )
        ks.append(h.n_random)
        extra += h.counts[2:].tolist()
    brute = noise.discrete_laplace(rnd, "brute", scale=1 / eps, size=398 * 1500, stage="s")
    passed = brute[brute >= t]
    assert np.mean(ks) == pytest.approx(398 * p, rel=0.1)
    assert passed.size / 1500 == pytest.approx(398 * p, rel=0.1)
    assert np.mean(np.asarray(ks) == 0) == pytest.approx((1 - p) ** 398, abs=0.04)
    assert (1 - p) ** 398 >= rho  # the tolerance holds exactly; the simulation agrees:
    assert np.mean(np.asarray(ks) == 0) >= rho - 0.02
    q = math.exp(-eps)
    assert np.mean(extra) == pytest.approx(t + q / (1 - q), rel=0.05)
    assert np.mean(passed) == pytest.approx(t + q / (1 - q), rel=0.05)


def test_domain_of_1e10_is_flat() -> None:
    """A 10^10 declared domain: few random values, tiny arrays, little memory (no enumeration)."""
    dec = DeclaredDomain("w", values=("a", "b"), size=10**10)
    rnd = ReleaseRandomness.from_seed(1)
    tracemalloc.start()
    ks = []
    for r in range(20):
        h = cathist_histogram(
            dec,
            np.array([0, 1]),
            np.array([900, 800]),
            epsilon=1.0,
            rho=0.5,
            rnd=rnd,
            label=f"x{r}",
            stage="s",
        )
        ks.append(h.n_random)
        assert set(h.labels[:2]) == {"a", "b"}
        assert all(2 <= i < 10**10 for i in dec.index_of(list(h.labels[2:])).tolist())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 5 * 2**20
    assert max(ks) < 10 and np.mean(ks) < 2  # E[k] ≈ -ln(0.5) = 0.69
    many = sample_inactive(
        10**10, np.array([5, 10, 10**10 - 1]), 2000, rng=np.random.default_rng(0)
    )
    assert np.unique(many).size == 2000
    assert not set(many.tolist()) & {5, 10, 10**10 - 1} and many.max() < 10**10


def test_sample_inactive_is_uniform() -> None:
    """Floyd sampling skips the excluded indices and hits the others uniformly."""
    rng = np.random.default_rng(3)
    hits = np.zeros(10)
    for _ in range(4000):
        s = sample_inactive(10, np.array([2, 5]), 3, rng=rng)
        assert np.unique(s).size == 3
        hits[s] += 1
    assert hits[2] == 0 and hits[5] == 0
    np.testing.assert_allclose(np.delete(hits, [2, 5]) / 4000, 3 / 8, atol=0.03)


def test_fidelity_metric() -> None:
    """F = 1 for identical category sets, 0 for disjoint ones, product of masses otherwise."""
    assert fidelity({"a": 5, "b": 5}, {"b": 1, "a": 3}) == 1.0
    assert fidelity({"a": 5}, {"z": 3}) == 0.0
    assert fidelity({"a": 6, "b": 4}, {"a": 3, "z": 1}) == pytest.approx(0.6 * 0.75)


def _sds_domain() -> Domain:
    return Domain(("sex", "city"), (("F", "M", "other"), ("Oslo", "Rome")))


def test_declared_one_tuples_releases_only_declared_values() -> None:
    """Undeclared data values are dropped (private note only); code maps re-encode the table."""
    declared = [
        DeclaredDomain("sex", values=("F", "M")),
        DeclaredDomain("city", values=("Oslo", "Paris", "Rome")),
    ]
    counts = {0: np.array([500, 480, 400]), 1: np.array([700, 3])}
    out = declared_one_tuples(
        _sds_domain(),
        counts,
        declared,
        sigma=2.0,
        threshold=20.0,
        rnd=ReleaseRandomness.from_seed(0),
        label="r/1",
        stage="k1",
    )
    assert out.domain.labels == (("F", "M"), ("Oslo",))
    assert [m.tolist() for m in out.code_maps] == [[0, 1, -1], [0, -1]]
    assert out.one_tuples.attrs.ravel().tolist() == [0, 1, 2]
    assert abs(out.one_tuples.counts - np.array([500, 480, 700])).max() < 15
    assert out.private_notes == {"sex": {"undeclared_values": ["other"], "n_undeclared_values": 1}}
    with pytest.raises(SdsInputError, match=r"missing \['city'\]"):
        declared_one_tuples(
            _sds_domain(),
            counts,
            declared[:1],
            sigma=2.0,
            threshold=20.0,
            rnd=ReleaseRandomness.from_seed(0),
            label="r/2",
            stage="k1",
        )


def test_declared_one_tuples_gaussian_tail_matches_brute_force() -> None:
    """Inactive declared values pass as often, and with the same counts, as explicit noise."""
    dom = Domain(("c",), (("v000",),))
    dec = [DeclaredDomain("c", values=tuple(f"v{i:03d}" for i in range(300)))]
    sigma, thr = 3.0, 4.5
    rnd = ReleaseRandomness.from_seed(5)
    ks, vals = [], []
    for r in range(400):
        out = declared_one_tuples(
            dom,
            {0: np.array([1000])},
            dec,
            sigma=sigma,
            threshold=thr,
            rnd=rnd,
            label=f"r{r}",
            stage="k1",
        )
        ks.append(len(out.one_tuples) - 1)
        vals += out.one_tuples.counts[1:].tolist()
    brute = noise.discrete_gaussian(rnd, "brute", sigma=sigma, size=299 * 400, stage="k1")
    passed = brute[brute > thr]
    assert np.mean(ks) == pytest.approx(passed.size / 400, rel=0.08)
    assert min(vals) >= 5
    assert np.mean(vals) == pytest.approx(passed.mean(), rel=0.03)


def test_declared_one_tuples_handles_1e10_domain() -> None:
    """A 10^10 declared domain costs nothing: survivors are few and properly labelled."""
    dom = Domain(("w",), (("a", "b"),))
    dec = [DeclaredDomain("w", values=("a", "b"), size=10**10)]
    out = declared_one_tuples(
        dom,
        {0: np.array([800, 900])},
        dec,
        sigma=5.0,
        threshold=40.0,
        rnd=ReleaseRandomness.from_seed(2),
        label="r",
        stage="k1",
    )
    assert out.domain.labels[0][:2] == ("a", "b")
    assert len(out.one_tuples) < 10
