"""The consistent model's pair-dependence structure (ModelParams(structure="pair-dependence"))."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from sds_core.data.preparation import prepare
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError
from sds_core.evaluation.metrics import marginal_fidelity
from sds_core.marginals.engine import dp_aggregate
from sds_core.marginals.params import DpParams
from sds_core.synthesis.consistent import (
    AggregateNoise,
    ModelParams,
    fit_aggregates,
    records_of,
)
from sds_core.synthesis.dependence import pair_dependence, tree_by_pairs


def test_independent_pair_weighs_nothing_dependent_pair_its_misplaced_records() -> None:
    """An independent table weighs 0; a copy of one column weighs the records it misplaces."""
    independent = np.outer([30.0, 70.0], [40.0, 60.0]) / 100
    copy = np.diag([30.0, 70.0])
    tables = {(0, 1): independent, (0, 2): copy, (1, 2): independent}
    w = pair_dependence(3, tables.__getitem__, lambda pair: 0, 0.0)
    assert w[0, 1] == pytest.approx(0.0)
    assert w[0, 2] == pytest.approx(2 * (30 - 9) + 2 * 21)  # |30-9|+|0-21|+|0-21|+|70-49|
    np.testing.assert_array_equal(w, w.T)


def test_noise_is_subtracted_per_published_cell() -> None:
    """Each published cell costs √(2/π)·noise_sd: noisy pairs of many cells weigh less."""
    copy = {(0, 1): np.diag([50.0, 50.0])}
    quiet = pair_dependence(2, copy.__getitem__, lambda pair: 4, 0.0)[0, 1]
    noisy = pair_dependence(2, copy.__getitem__, lambda pair: 4, 10.0)[0, 1]
    assert quiet - noisy == pytest.approx(4 * 10.0 * np.sqrt(2 / np.pi))


def test_tree_keeps_the_heavy_pairs_and_covers_every_column() -> None:
    """The two heaviest pairs land in cliques; every column is in the tree exactly once first."""
    w = np.zeros((5, 5))
    for (a, b), v in {(0, 3): 9.0, (1, 4): 8.0, (3, 4): 1.0}.items():
        w[a, b] = w[b, a] = v
    tree = tree_by_pairs(
        w, (3,) * 5, max_clique_columns=3, max_clique_cells=100, max_model_cells=1000
    )
    inside = {p for c in tree.cliques for p in itertools.combinations(c, 2)}
    assert {(0, 3), (1, 4)} <= inside
    assert set().union(*map(set, tree.cliques)) == set(range(5))


def test_tree_respects_the_cell_limits() -> None:
    """A pair too large for max_clique_cells is never a clique, however heavy."""
    w = np.array([[0, 100, 1], [100, 0, 1], [1, 1, 0]], dtype=float)
    tree = tree_by_pairs(
        w, (50, 50, 2), max_clique_columns=3, max_clique_cells=200, max_model_cells=10_000
    )
    assert all(not {0, 1} <= set(c) for c in tree.cliques)
    assert max(np.prod([(50, 50, 2)[i] for i in c]) for c in tree.cliques) <= 200


def test_no_cells_for_pairs_that_carry_nothing() -> None:
    """A separator wider than one column holds only columns with positive weight to the new one."""
    w = np.zeros((3, 3))
    w[0, 1] = w[1, 0] = 5.0
    w[1, 2] = w[2, 1] = 3.0  # column 2 depends on 1 only
    tree = tree_by_pairs(
        w, (2, 2, 2), max_clique_columns=3, max_clique_cells=100, max_model_cells=100
    )
    assert tree.cliques == ((0, 1), (1, 2))


def test_unknown_structure_is_refused() -> None:
    """ModelParams names the structures it knows."""
    with pytest.raises(SdsInputError, match="structure must be one of"):
        ModelParams(structure="chow-liu")
    assert ModelParams().structure == "g-statistic"  # the default is unchanged


def test_model_with_pair_structure_keeps_a_chain_of_dependent_columns() -> None:
    """End to end (R = 2, ε = 2): every link of a chain A-B-C-D-E is inside a clique.

    W has 200 values whose parity is A; the model is fitted to the DP aggregates only.
    """
    rng = np.random.default_rng(0)
    n = 20_000
    chain = [rng.integers(0, 2, n)]
    for _ in range(4):
        chain.append((chain[-1] + (rng.random(n) < 0.1)) % 2)
    w = rng.integers(0, 100, n) * 2 + chain[0]
    columns = {"W": [f"w{v}" for v in w]}
    columns.update({k: [f"{k}{v}" for v in col] for k, col in zip("ABCDE", chain, strict=True)})
    table = prepare(pd.DataFrame(columns))
    result = dp_aggregate(
        table,
        DpParams(epsilon=2.0, delta=1e-6, reporting_length=2),
        ReleaseRandomness.from_seed(3),
    )
    rep = result.report
    noise = AggregateNoise.from_release(
        rep.sigma_by_len, rep.allowed_sensitivity_by_len, rep.threshold_by_len
    )
    model = fit_aggregates(result.aggregates, noise, ModelParams(structure="pair-dependence"))
    inside = {p for c in model.tree.cliques for p in itertools.combinations(c, 2)}
    assert {(1, 2), (2, 3), (3, 4), (4, 5), (0, 1)} <= inside
    records = records_of(model, result.aggregates, n, rng=np.random.default_rng(0))
    tvd = marginal_fidelity(table, records, max_order=2)["tvd_mean_by_order"]
    assert tvd[1] < 0.05 and tvd[2] < 0.1
