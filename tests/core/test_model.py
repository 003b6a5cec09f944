"""The consistent model: junction tree, inference, measurements, mirror descent, sampling."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from sds_core.errors import SdsInputError, SdsInternalError
from sds_core.model.estimation import fit_model
from sds_core.model.inference import calibrate, calibrate_log, marginal_of
from sds_core.model.measurements import Measurement, log_ndtr
from sds_core.model.sampling import round_balanced, sample_records
from sds_core.model.structure import (
    JunctionTree,
    check_model_size,
    model_bytes,
    tree_of_cliques,
)

SIZES = (3, 4, 2, 3)
TREE = JunctionTree(SIZES, ((0, 1), (1, 2), (1, 3)), (-1, 0, 0))


def _brute_joint(tree: JunctionTree, theta: list[np.ndarray]) -> np.ndarray:
    """The joint table of exp(sum of potentials), normalised (brute force)."""
    joint = np.zeros(tree.sizes)
    for x in itertools.product(*(range(s) for s in tree.sizes)):
        joint[x] = math.exp(
            sum(t[tuple(x[c] for c in cl)] for t, cl in zip(theta, tree.cliques, strict=True))
        )
    return joint / joint.sum()


def test_calibrate_matches_brute_force() -> None:
    """Every clique marginal of belief propagation equals the brute-force joint's marginal."""
    rng = np.random.default_rng(3)
    theta = [rng.normal(size=TREE.clique_shape(j)) for j in range(3)]
    mu = calibrate(TREE, theta, 100.0)
    joint = _brute_joint(TREE, theta) * 100.0
    for j, clique in enumerate(TREE.cliques):
        other = tuple(i for i in range(4) if i not in clique)
        np.testing.assert_allclose(mu[j], joint.sum(axis=other), rtol=1e-10)


def test_linear_calibration_equals_log_space_and_falls_back_on_underflow() -> None:
    """The linear-space pass gives the log-space marginals; potentials spanning more than
    float64's range (a belief that would underflow to nothing) take the log-space pass."""
    rng = np.random.default_rng(5)
    theta = [rng.normal(scale=8.0, size=TREE.clique_shape(j)) for j in range(3)]
    for a, b in zip(calibrate(TREE, theta, 50.0), calibrate_log(TREE, theta, 50.0), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-300)
    # clique 1 puts all its mass on the separator value its parent makes ~e^-2000 as likely
    steep = [np.zeros(TREE.clique_shape(j)) for j in range(3)]
    steep[0][:, 0] = 2000.0
    steep[1][1:, :] = 2000.0
    mu = calibrate(TREE, steep, 10.0)
    want = _brute_joint_log(TREE, steep) * 10.0
    for j, clique in enumerate(TREE.cliques):
        other = tuple(i for i in range(4) if i not in clique)
        assert np.all(np.isfinite(mu[j])) and mu[j].sum() == pytest.approx(10.0)
        np.testing.assert_allclose(mu[j], want.sum(axis=other), rtol=1e-9, atol=1e-12)


def _brute_joint_log(tree: JunctionTree, theta: list[np.ndarray]) -> np.ndarray:
    """:func:`_brute_joint` in log space (potentials of any range)."""
    log_joint = np.zeros(tree.sizes)
    for x in itertools.product(*(range(s) for s in tree.sizes)):
        log_joint[x] = sum(
            t[tuple(x[c] for c in cl)] for t, cl in zip(theta, tree.cliques, strict=True)
        )
    joint = np.exp(log_joint - log_joint.max())
    return joint / joint.sum()


@pytest.mark.parametrize("censored", [False, True])
def test_measurement_loss_and_gradient(censored: bool) -> None:
    """The compiled losses are the closed forms, and their gradients the finite differences."""
    rng = np.random.default_rng(11)
    marginal = rng.uniform(0.0, 30.0, size=(4, 5))
    cells = np.array([0, 3, 7, 12, 19])
    values = rng.uniform(0.0, 30.0, size=cells.size)
    m = Measurement((0, 1), cells, values, 2.5, censored)
    loss, grad = m.loss_and_grad(marginal)
    mu = marginal.reshape(-1)[cells]
    if censored:
        z = (values - mu) / 2.5
        want = -sum(math.log(0.5 * math.erfc(-v / math.sqrt(2))) for v in z)
    else:
        want = float(np.sum((mu - values) ** 2) / (2 * 2.5**2))
    assert loss == pytest.approx(want, rel=1e-6)
    assert np.count_nonzero(grad) <= cells.size
    for cell in (3, 12):
        bumped = marginal.copy().reshape(-1)
        bumped[cell] += 1e-6
        numeric = (m.loss_and_grad(bumped.reshape(4, 5))[0] - loss) / 1e-6
        assert grad.reshape(-1)[cell] == pytest.approx(numeric, rel=1e-3, abs=1e-6)


def test_running_intersection_is_enforced() -> None:
    """A clique sharing a seen column its parent lacks is a bug (SdsInternalError)."""
    with pytest.raises(SdsInternalError, match="running intersection"):
        JunctionTree((2, 2, 2), ((0, 1), (1, 2), (0, 2)), (-1, 0, 1))


def test_log_ndtr_matches_erfc() -> None:
    """log Φ agrees with math.erfc over the whole range, far tails included."""
    z = np.array([-30.0, -8.0, -1.0, 0.0, 1.5, 6.0])
    want = [math.log(0.5 * math.erfc(-v / math.sqrt(2))) for v in z]
    np.testing.assert_allclose(log_ndtr(z), want, rtol=2e-6, atol=1e-12)


def test_fit_recovers_exact_marginals() -> None:
    """With precise measurements of a tree distribution the fit reproduces its marginals."""
    rng = np.random.default_rng(5)
    theta = [rng.normal(size=TREE.clique_shape(j)) for j in range(3)]
    truth = calibrate(TREE, theta, 1000.0)
    ms = [
        Measurement(cl, np.arange(t.size, dtype=np.int64), t.reshape(-1), 0.5)
        for cl, t in zip(TREE.cliques, truth, strict=True)
    ]
    fitted = fit_model(TREE, ms, 1000.0, iterations=2000)
    for got, want in zip(fitted.marginals, truth, strict=True):
        assert np.abs(got - want).sum() < 5.0  # of 1000 records


def test_censored_measurement_keeps_the_cell_low() -> None:
    """A suppressed cell (censored below 2) ends near or below 2, not at its uniform share."""
    tree = JunctionTree((2, 2), ((0, 1),), (-1,))
    observed = Measurement((0, 1), np.array([0, 1, 2]), np.array([300.0, 300.0, 400.0]), 1.0)
    censored = Measurement((0, 1), np.array([3]), np.array([2.0]), 1.0, censored=True)
    fitted = fit_model(tree, [observed, censored], 1000.0, iterations=2000)
    assert fitted.marginals[0].reshape(-1)[3] < 4.0
    assert fitted.marginals[0].sum() == pytest.approx(1000.0)


def test_measurement_outside_every_clique_is_refused() -> None:
    """A measurement over columns no clique holds is an input error."""
    m = Measurement((0, 2), np.array([0]), np.array([1.0]), 1.0)
    with pytest.raises(SdsInputError, match="in no model clique"):
        fit_model(TREE, [m], 10.0)


def test_round_balanced_floor_or_ceiling_totals_and_balanced_columns() -> None:
    """Each cell gets the floor or the ceiling of its expectation, rows keep their sizes, and
    every column's total stays within one record of its expectation (independent rounding per
    group would drift by about half the square root of the number of groups)."""
    rng = np.random.default_rng(0)
    for _ in range(50):
        groups, values = int(rng.integers(1, 400)), int(rng.integers(1, 30))
        cond = rng.dirichlet(np.full(values, 0.3), size=groups)
        sizes = rng.integers(0, 50, size=groups)
        out = round_balanced(cond, sizes, rng)
        expected = cond * sizes[:, None]
        assert (out.sum(axis=1) == sizes).all()
        assert (np.abs(out - expected) < 1 + 1e-9).all()
        assert np.abs(out.sum(axis=0) - expected.sum(axis=0)).max() < 1


def test_samples_follow_the_model_to_within_rounding() -> None:
    """Every column's sampled 1-way count is within 1 of the model's; cliques are close."""
    rng = np.random.default_rng(9)
    theta = [rng.normal(size=TREE.clique_shape(j)) for j in range(3)]
    mu = calibrate(TREE, theta, 1.0)
    from sds_core.model.estimation import FittedModel

    model = FittedModel(TREE, tuple(theta), tuple(m * 5000 for m in mu), 5000.0, 0.0, 0)
    rows = sample_records(model, 5000, rng=rng)
    for j, clique in enumerate(TREE.cliques):
        counts = np.zeros(TREE.clique_shape(j))
        np.add.at(counts, tuple(rows[:, c] for c in clique), 1)
        assert np.abs(counts - model.marginals[j]).max() <= 0.01 * 5000
        for axis, c in enumerate(clique):
            others = tuple(a for a in range(len(clique)) if a != axis)
            one_way = np.bincount(rows[:, c], minlength=TREE.sizes[c])
            assert np.abs(one_way - model.marginals[j].sum(axis=others)).max() < 1 + 1e-9


def test_model_size_refusal_names_the_columns() -> None:
    """Above the limit the message names the largest table's columns and what to do."""
    assert model_bytes((10, 10), [(0, 1)]) == 48 * 100
    with pytest.raises(SdsInputError, match=r"income \(2000 values\) x puma \(300 values\)"):
        check_model_size((2000, 300, 3), [(0, 1), (2,)], ("income", "puma", "sex"), 10**6)


def test_marginal_of_any_columns_matches_brute_force() -> None:
    """A marginal across cliques (columns 0, 2, 3: no clique holds them) equals the joint's."""
    rng = np.random.default_rng(4)
    theta = [rng.normal(size=TREE.clique_shape(j)) for j in range(3)]
    mu = calibrate(TREE, theta, 50.0)
    joint = _brute_joint(TREE, theta) * 50.0
    np.testing.assert_allclose(marginal_of(TREE, mu, (0, 2, 3)), joint.sum(axis=1), rtol=1e-10)
    np.testing.assert_allclose(marginal_of(TREE, mu, (1, 3)), joint.sum(axis=(0, 2)), rtol=1e-10)


@pytest.mark.parametrize(
    "cliques",
    [
        [(0, 1), (1, 2), (2, 3), (0, 3)],  # a cycle: must be triangulated
        [(0, 1, 2), (2, 3), (1, 3)],
        [(0,), (3,)],  # lone columns, some never measured
    ],
)
def test_tree_of_cliques_covers_every_clique(cliques: list[tuple[int, ...]]) -> None:
    """Every requested clique lies in one tree clique; the tree is valid (running intersection)."""
    tree = tree_of_cliques(SIZES, cliques)  # JunctionTree checks the running intersection
    assert all(tree.containing(c) >= 0 for c in cliques)
    assert sorted({c for cl in tree.cliques for c in cl}) == [0, 1, 2, 3]


def test_match_one_way_meets_every_target_and_keeps_the_tree() -> None:
    """IPF on the tree: each listed column's marginal ends at its target, the total is kept,
    and the pair marginals stay those of a distribution on the same tree."""
    from sds_core.model.estimation import FittedModel, match_one_way

    rng = np.random.default_rng(4)
    theta = [rng.normal(size=TREE.clique_shape(j)) for j in range(3)]
    mu = calibrate(TREE, theta, 1000.0)
    model = FittedModel(TREE, tuple(theta), tuple(mu), 1000.0, 0.0, 0)
    targets = {c: rng.dirichlet(np.ones(TREE.sizes[c])) * 1000.0 for c in range(len(TREE.sizes))}
    matched = match_one_way(model, targets, tolerance=1e-6, rounds=500)
    assert matched.tree is TREE and matched.total == 1000.0
    for c, target in targets.items():
        j = TREE.containing((c,))
        others = tuple(a for a, x in enumerate(TREE.cliques[j]) if x != c)
        np.testing.assert_allclose(matched.marginals[j].sum(axis=others), target, atol=1e-5)
    for table in matched.marginals:
        assert table.sum() == pytest.approx(1000.0)
    # the separator marginals of neighbouring cliques agree (still one distribution)
    for j in range(1, len(TREE.cliques)):
        p, sep = TREE.parents[j], TREE.separator(j)
        from sds_core.model.inference import project

        np.testing.assert_allclose(
            project(matched.marginals[j], TREE.cliques[j], sep),
            project(matched.marginals[p], TREE.cliques[p], sep),
            atol=1e-6,
        )
