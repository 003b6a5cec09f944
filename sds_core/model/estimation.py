"""Fit one distribution to noisy marginals: Private-PGM's mirror descent on a junction tree.

Minimises the measurements' negative log-likelihood over the marginal polytope of the tree's
graphical model (McKenna, Sheldon & Miklau 2019): entropic mirror descent on the clique
log-potentials with exact inference (:mod:`sds_core.model.inference`) and an Armijo line search.
The total count is fixed (a DP count). Post-processing of the measurements only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sds_core.errors import SdsInputError
from sds_core.model.inference import Table, broadcast_shape, calibrate, project
from sds_core.model.measurements import Measurement
from sds_core.model.structure import JunctionTree


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


def _assign(tree: JunctionTree, measurements: Sequence[Measurement]) -> list[int]:
    out = []
    for m in measurements:
        j = tree.containing(m.columns)
        if j < 0:
            raise SdsInputError(f"measurement over columns {m.columns} is in no model clique")
        out.append(j)
    return out


def _loss_and_grads(
    tree: JunctionTree,
    measurements: Sequence[Measurement],
    homes: Sequence[int],
    mu: Sequence[Table],
) -> tuple[float, list[Table]]:
    grads = [np.zeros_like(t) for t in mu]
    loss = 0.0
    for m, j in zip(measurements, homes, strict=True):
        clique = tree.cliques[j]
        value, g = m.loss_and_grad(project(mu[j], clique, m.columns))
        loss += value
        grads[j] += g.reshape(broadcast_shape(m.columns, clique, tree.sizes))
    return loss, grads


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
    homes = _assign(tree, measurements)
    if start is None:
        theta = [np.zeros(tree.clique_shape(j)) for j in range(len(tree.cliques))]
    else:
        theta = [np.asarray(t, dtype=np.float64) for t in start]
    mu = calibrate(tree, theta, total)
    loss, grads = _loss_and_grads(tree, measurements, homes, mu)
    alpha = 1.0 / total
    history = [loss]
    done = 0
    for step in range(1, iterations + 1):
        done = step
        alpha *= 2.0
        for _ in range(30):
            trial = [t - alpha * g for t, g in zip(theta, grads, strict=True)]
            mu_trial = calibrate(tree, trial, total)
            loss_trial, grads_trial = _loss_and_grads(tree, measurements, homes, mu_trial)
            decrease = sum(
                float(np.sum(g * (a - b))) for g, a, b in zip(grads, mu, mu_trial, strict=True)
            )
            if loss - loss_trial >= 0.5 * decrease:
                break
            alpha *= 0.5
        else:
            break  # no step decreases the loss: converged to numerical precision
        theta, mu, loss, grads = trial, mu_trial, loss_trial, grads_trial
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
