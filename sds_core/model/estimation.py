"""Fit one distribution to noisy marginals: Private-PGM's mirror descent on a junction tree.

Minimises the measurements' negative log-likelihood over the marginal polytope of the tree's
graphical model (McKenna, Sheldon & Miklau 2019): entropic mirror descent on the clique
log-potentials with exact inference (:mod:`sds_core.model.inference`) and an Armijo line search.
The total count is fixed (a DP count). Post-processing of the measurements only.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sds_core.errors import SdsInputError
from sds_core.model.inference import Table, broadcast_shape, calibrate, other_axes, project
from sds_core.model.measurements import Measurement
from sds_core.model.structure import Clique, JunctionTree


@dataclass(frozen=True, slots=True, eq=False)
class FittedModel:
    """A fitted model: the tree, its potentials and calibrated clique marginals (counts).

    Attributes:
        tree: the junction tree.
        potentials: one log-potential table per clique.
        marginals: one table per clique, counts summing to ``total``.
        total: the model's record count.
        loss: final negative log-likelihood of the measurements.
        iterations: mirror-descent iterations run.
    """

    tree: JunctionTree
    potentials: tuple[Table, ...]
    marginals: tuple[Table, ...]
    total: float
    loss: float
    iterations: int

    def marginal(self, columns: Sequence[int]) -> Table:
        """The model's marginal over ``columns`` (they must lie in one clique)."""
        j = self.tree.containing(columns)
        if j < 0:
            raise SdsInputError(f"columns {list(columns)} are in no clique of the model")
        return project(self.marginals[j], self.tree.cliques[j], sorted(columns))


@dataclass(frozen=True, slots=True)
class _Group:
    """The measurements over one column subset, all read from one clique's table.

    ``source`` is the earlier group of the same clique whose marginal this one is summed from
    (its smallest superset; -1: the clique's table), so each marginal costs a pass over a
    smaller table; its gradient is added back the same way (broadcast by ``source_shape``)
    until it reaches the clique's table.
    """

    clique: int
    columns: Clique
    measurements: tuple[Measurement, ...]
    source: int
    source_columns: Clique
    source_shape: tuple[int, ...]
    axes: tuple[int, ...]  # the axes of the source's table summed to this group's marginal


def _groups(tree: JunctionTree, measurements: Sequence[Measurement]) -> list[_Group]:
    """The measurements grouped by column subset, in the order their marginals are computed."""
    by_subset: dict[tuple[int, Clique], list[Measurement]] = {}
    for m in measurements:
        j = tree.containing(m.columns)
        if j < 0:
            raise SdsInputError(f"measurement over columns {m.columns} is in no model clique")
        m.check_cells(math.prod(tree.sizes[c] for c in m.columns))
        by_subset.setdefault((j, tuple(m.columns)), []).append(m)
    keys = sorted(by_subset, key=lambda key: (key[0], -len(key[1]), key[1]))
    out: list[_Group] = []
    for j, columns in keys:
        source, source_columns = -1, tree.cliques[j]
        for i, g in enumerate(out):  # the smallest measured superset seen so far in clique j
            if (
                g.clique == j
                and set(columns) < set(g.columns)
                and math.prod(tree.sizes[c] for c in g.columns)
                < math.prod(tree.sizes[c] for c in source_columns)
            ):
                source, source_columns = i, g.columns
        shape = tuple(broadcast_shape(columns, source_columns, tree.sizes))
        out.append(
            _Group(
                j,
                columns,
                tuple(by_subset[j, columns]),
                source,
                source_columns,
                shape,
                other_axes(source_columns, columns),
            )
        )
    return out


def _marginals(tree: JunctionTree, groups: Sequence[_Group], mu: Sequence[Table]) -> list[Table]:
    """Each group's marginal of the calibrated clique tables ``mu`` (contiguous)."""
    out: list[Table] = []
    for g in groups:
        table = mu[g.clique] if g.source < 0 else out[g.source]
        # project(table, g.source_columns, g.columns), its axes found once per fit
        out.append(np.ascontiguousarray(table.sum(axis=g.axes) if g.axes else table))
    return out


def _loss_and_grads(
    groups: Sequence[_Group], marginals: Sequence[Table]
) -> tuple[float, list[Table]]:
    """The measurements' negative log-likelihood and its gradient on each group's marginal."""
    loss = 0.0
    grads: list[Table] = []
    for g, marginal in zip(groups, marginals, strict=True):
        flat = marginal.reshape(-1)
        grad = np.zeros_like(flat)
        for m in g.measurements:
            loss += m.add_loss_and_grad(flat, grad)
        grads.append(grad.reshape(marginal.shape))
    return loss, grads


def _clique_grads(
    tree: JunctionTree, groups: Sequence[_Group], grads: Sequence[Table]
) -> list[Table]:
    """The gradient on every clique's log-potential (each group's, broadcast to its clique)."""
    out = [np.zeros(shape) for shape in _clique_shapes(tree)]
    into: list[Table | None] = [None] * len(groups)
    for i in range(len(groups) - 1, -1, -1):  # sources come before the groups summed from them
        g, extra = groups[i], into[i]
        grad = grads[i] if extra is None else grads[i] + extra
        if g.source < 0:
            out[g.clique] += grad.reshape(g.source_shape)
        else:
            below = into[g.source]
            add = grad.reshape(g.source_shape)
            into[g.source] = add if below is None else below + add
    return out


@functools.lru_cache(maxsize=16)
def _clique_shapes(tree: JunctionTree) -> tuple[tuple[int, ...], ...]:
    return tuple(tree.clique_shape(j) for j in range(len(tree.cliques)))


def _dot(a: Table, b: Table) -> float:
    # einsum, not `a @ b`: BLAS ddot wakes OpenBLAS threads above 10k cells, which spin against
    # each other on a loaded machine (aim at 1M: 81 s -> 32 s at load 5)
    return float(np.einsum("i,i->", a.reshape(-1), b.reshape(-1)))


def fit_model(
    tree: JunctionTree,
    measurements: Sequence[Measurement],
    total: float,
    *,
    iterations: int = 500,
    tolerance: float = 1e-7,
    start: Sequence[Table] | None = None,
) -> FittedModel:
    """The maximum-likelihood distribution (scaled to ``total``) on ``tree`` for the measurements.

    Args:
        tree: the model's junction tree; every measurement's columns lie in one of its cliques.
        measurements: the noisy (and censored) marginal measurements.
        total: the record count the model sums to (> 0).
        iterations: most mirror-descent iterations.
        tolerance: stop when the loss improved by less than this fraction over 10 iterations.
        start: initial log-potentials (default: all zero, the uniform distribution).

    Raises:
        SdsInputError: total not > 0, or a measurement outside every clique.
    """
    if not total > 0:
        raise SdsInputError(f"the model's total count must be > 0, got {total!r}")
    groups = _groups(tree, measurements)
    if start is None:
        theta = [np.zeros(tree.clique_shape(j)) for j in range(len(tree.cliques))]
    else:
        theta = [np.asarray(t, dtype=np.float64) for t in start]
    mu = calibrate(tree, theta, total)
    marginals = _marginals(tree, groups, mu)
    loss, grads = _loss_and_grads(groups, marginals)
    alpha = 1.0 / total
    history = [loss]
    done = 0
    for step in range(1, iterations + 1):
        done = step
        alpha *= 2.0
        direction = _clique_grads(tree, groups, grads)
        for _ in range(30):
            trial = [t - alpha * g for t, g in zip(theta, direction, strict=True)]
            mu_trial = calibrate(tree, trial, total)
            marginals_trial = _marginals(tree, groups, mu_trial)
            loss_trial, grads_trial = _loss_and_grads(groups, marginals_trial)
            # Σ over cliques of gradient · (μ − μ_trial), summed on the measured marginals
            decrease = sum(
                _dot(g, a - b) for g, a, b in zip(grads, marginals, marginals_trial, strict=True)
            )
            if loss - loss_trial >= 0.5 * decrease:
                break
            alpha *= 0.5
        else:
            break  # no step decreases the loss: converged to numerical precision
        theta, mu, loss, grads, marginals = (
            trial,
            mu_trial,
            loss_trial,
            grads_trial,
            marginals_trial,
        )
        history.append(loss)
        if len(history) > 10 and history[-11] - loss <= tolerance * max(abs(loss), 1.0):
            break
    return FittedModel(tree, tuple(theta), tuple(mu), float(total), float(loss), done)


def match_one_way(
    model: FittedModel,
    targets: Mapping[int, Table],
    *,
    rounds: int = 50,
    tolerance: float = 0.05,
) -> FittedModel:
    """``model`` adjusted so each listed column's marginal equals its target (IPF on the tree).

    Iterative proportional fitting: for each column in turn, the potential of the first clique
    holding it is multiplied by target / current marginal, and the tree is calibrated again;
    rounds repeat until every marginal is within ``tolerance`` records of its target. The result
    stays a distribution on the same tree (the I-projection of the model onto the set with
    those marginals) and keeps the model's total, so every target must sum to it.

    Args:
        model: a fitted model.
        targets: column -> counts over its categories (all > 0 after a floor of 1e-9·total),
            each summing to ``model.total``.
        rounds: most passes over the columns.
        tolerance: stop when no marginal is further than this from its target (records).
    """
    tree = model.tree
    theta = [np.array(t, dtype=np.float64, copy=True) for t in model.potentials]
    floor = 1e-9 * model.total
    homes = {c: tree.containing((c,)) for c in targets}
    goal = {
        c: np.log(np.maximum(np.asarray(t, dtype=np.float64), floor)) for c, t in targets.items()
    }
    mu = list(model.marginals)
    for _ in range(rounds):
        worst = 0.0
        for c, j in homes.items():
            current = project(mu[j], tree.cliques[j], (c,))
            worst = max(worst, float(np.max(np.abs(current - targets[c]))))
            step = goal[c] - np.log(np.maximum(current, 1e-300))
            theta[j] = theta[j] + step.reshape(broadcast_shape((c,), tree.cliques[j], tree.sizes))
            mu = calibrate(tree, theta, model.total)
        if worst <= tolerance:
            break
    return FittedModel(tree, tuple(theta), tuple(mu), model.total, model.loss, model.iterations)
