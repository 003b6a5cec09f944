"""DP quantile bin edges: candidates, accuracy at large ε, determinism, validation."""

from __future__ import annotations

import numpy as np
import pytest

from sds_core.dp.quantiles import candidate_edges, dp_quantile_edges, quantile_rho
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError


def _edges(values: np.ndarray, epsilon: float, seed: int = 0, **kw: object) -> tuple[float, ...]:
    """Edges of 4 bins of ``values`` in [0, 1000] (integer column) with key ``seed``."""
    args = {"lower": 0.0, "upper": 1000.0, "bins": 4, "integer": True} | kw
    return dp_quantile_edges(
        values,
        epsilon=epsilon,
        rnd=ReleaseRandomness.from_seed(seed),
        label="r/binning/x",
        stage="binning",
        **args,  # type: ignore[arg-type]
    )


def test_candidates_are_public_and_inside_the_range() -> None:
    """Candidates depend only on the declared range: integers when few, else a 1024 grid."""
    assert candidate_edges(0, 3, integer=True).tolist() == [1.0, 2.0]
    grid = candidate_edges(0.0, 1.0, integer=False)
    assert grid.size == 1024 and 0 < grid.min() and grid.max() < 1


def test_large_epsilon_finds_the_quantiles() -> None:
    """At a large ε the edges are within 2% of the true quartiles."""
    x = np.random.default_rng(1).integers(0, 1001, 20_000).astype(float)
    edges = _edges(x, epsilon=50.0)
    assert edges[0] == 0 and edges[-1] == 1000 and len(edges) == 5
    for got, q in zip(edges[1:-1], (0.25, 0.5, 0.75), strict=True):
        assert abs(got - np.quantile(x, q)) < 20


def test_same_key_same_edges_other_key_other_draws() -> None:
    """Edges replay from the key; they are ascending and inside the declared range."""
    x = np.random.default_rng(2).normal(500, 100, 500).clip(0, 1000)
    assert _edges(x, 0.5, seed=3) == _edges(x, 0.5, seed=3)
    for seed in range(5):
        e = _edges(x, 0.1, seed=seed)
        assert list(e) == sorted(set(e)) and e[0] == 0 and e[-1] == 1000


@pytest.mark.parametrize(
    ("kw", "match"),
    [({"bins": 1}, "dp_quantiles"), ({"lower": 5.0, "upper": 5.0}, "min < max")],
)
def test_bad_settings(kw: dict, match: str) -> None:
    """Fewer than 2 bins or an empty range are input errors."""
    with pytest.raises(SdsInputError, match=match):
        _edges(np.array([1.0]), 1.0, **kw)


def test_rho_of_bounded_range_selections() -> None:
    """ρ = (q − 1)·(ε/(q − 1))²/8 for one column."""
    assert quantile_rho(2.0, 3) == pytest.approx(2 * 1.0**2 / 8)
