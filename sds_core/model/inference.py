"""Exact inference on a junction tree: calibrated clique marginals from log-potentials.

Two passes of sum-product (leaves to root, root to leaves; in linear space with rescaled
messages, in log space when that would underflow) give every clique's marginal of the
distribution p(x) ∝ exp(Σ_j θ_j(x_Cj)), scaled to a total count. Used by
:mod:`sds_core.model.estimation` at every mirror-descent step and by the sampler.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sds_core.model.structure import Clique, JunctionTree

Table = NDArray[np.float64]


def broadcast_shape(sub: Sequence[int], clique: Sequence[int], sizes: Sequence[int]) -> list[int]:
    """Shape that makes a table over ``sub`` (a subset of ``clique``) broadcast against it.

    >>> broadcast_shape((2,), (0, 2), (3, 4, 5))
    [1, 5]
    """
    inside = set(sub)
    return [sizes[c] if c in inside else 1 for c in clique]


def other_axes(clique: Sequence[int], sub: Sequence[int]) -> tuple[int, ...]:
    """Axes of a ``clique`` table that are not columns of ``sub``."""
    inside = set(sub)
    return tuple(i for i, c in enumerate(clique) if c not in inside)


def logsumexp(a: Table, axes: tuple[int, ...]) -> Table:
    """log Σ exp(a) over ``axes`` (stable); no axes: ``a`` itself."""
    if not axes:
        return a
    m = np.max(a, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    out = np.log(np.sum(np.exp(a - m), axis=axes, keepdims=True)) + m
    squeezed: Table = np.squeeze(out, axis=axes)
    return squeezed


def project(table: Table, clique: Clique, sub: Sequence[int]) -> Table:
    """Marginal of a clique table on the columns ``sub`` (sum over the others)."""
    axes = other_axes(clique, sub)
    return table.sum(axis=axes) if axes else table


_Message = tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]


@functools.lru_cache(maxsize=16)
def _messages(tree: JunctionTree) -> tuple[_Message, ...]:
    """Per clique j > 0 (index 0: unused): its parent, the axes of clique j summed for its
    message up, the message's shape in the parent's table, the parent's axes summed for the
    message down and its shape in clique j's table. Computed once per tree: :func:`calibrate`
    runs twice per mirror-descent step."""
    out: list[_Message] = [(-1, (), (), (), ())]
    for j in range(1, len(tree.cliques)):
        p, sep = tree.parents[j], tree.separator(j)
        out.append(
            (
                p,
                other_axes(tree.cliques[j], sep),
                tuple(broadcast_shape(sep, tree.cliques[p], tree.sizes)),
                other_axes(tree.cliques[p], sep),
                tuple(broadcast_shape(sep, tree.cliques[j], tree.sizes)),
            )
        )
    return tuple(out)


def calibrate(tree: JunctionTree, theta: Sequence[Table], total: float) -> list[Table]:
    """Every clique's marginal (counts summing to ``total``) of p ∝ exp(Σ θ_j).

    Sum-product in linear space: each clique's potential exp(θ_j − max θ_j) (one exponential
    per cell), messages rescaled to a maximum of 1 on the way up, and every belief normalised
    to ``total`` at the end; the calibrated tree's beliefs all sum to the same partition
    function, so normalising each is exact. If a belief underflows to nothing (potentials
    spanning more than ~700 nats), the same marginals are computed in log space instead.

    Args:
        tree: the junction tree.
        theta: one log-potential table per clique, shaped ``tree.clique_shape(j)``.
        total: the count the marginals sum to.
    """
    n = len(tree.cliques)
    plan = _messages(tree)
    acc = [np.exp(t - t.max()) for t in theta]
    up: list[Table] = [np.empty(0)] * n
    for j in range(n - 1, 0, -1):  # children have larger indices: they are done first
        p, up_axes, into_parent, _, _ = plan[j]
        message = acc[j].sum(axis=up_axes) if up_axes else acc[j]  # project(), as below
        top = float(message.max()) if message.size else 0.0
        if not top > 0:
            return calibrate_log(tree, theta, total)
        message = message / top
        up[j] = message
        acc[p] *= message.reshape(into_parent)
    beliefs = [acc[0]] + [np.empty(0)] * (n - 1)
    for j in range(1, n):
        p, _, _, down_axes, into_child = plan[j]
        down = beliefs[p].sum(axis=down_axes) if down_axes else beliefs[p]
        down = np.divide(down, up[j], out=np.zeros_like(down), where=up[j] > 0)
        beliefs[j] = acc[j] * down.reshape(into_child)
    out = []
    for b in beliefs:
        mass = float(b.sum())
        if not (mass > 0 and math.isfinite(mass)):
            return calibrate_log(tree, theta, total)
        b *= total / mass
        out.append(b)
    return out


def calibrate_log(tree: JunctionTree, theta: Sequence[Table], total: float) -> list[Table]:
    """:func:`calibrate` by log-space sum-product (slower; no underflow at any range)."""
    n = len(tree.cliques)
    acc = [np.array(t, dtype=np.float64, copy=True) for t in theta]
    up_parts: list[Table] = [np.empty(0)] * n
    for j in range(n - 1, 0, -1):  # children have larger indices: they are done first
        sep = tree.separator(j)
        up_j = logsumexp(acc[j], other_axes(tree.cliques[j], sep))
        up_parts[j] = up_j
        p = tree.parents[j]
        acc[p] = acc[p] + up_j.reshape(broadcast_shape(sep, tree.cliques[p], tree.sizes))
    beliefs = [acc[0]] + [np.empty(0)] * (n - 1)
    for j in range(1, n):
        p, sep = tree.parents[j], tree.separator(j)
        up_j = up_parts[j]
        down = logsumexp(beliefs[p], other_axes(tree.cliques[p], sep)) - up_j
        beliefs[j] = acc[j] + down.reshape(broadcast_shape(sep, tree.cliques[j], tree.sizes))
    log_z = float(logsumexp(beliefs[0], tuple(range(beliefs[0].ndim))))
    return [total * np.exp(b - log_z) for b in beliefs]


def marginal_of(tree: JunctionTree, marginals: Sequence[Table], columns: Sequence[int]) -> Table:
    """The model's marginal (counts) over any ascending ``columns``, in a clique or not.

    Inside one clique it is a projection; otherwise the distribution's factorisation (root
    marginal times each clique's conditional on its separator) is contracted with einsum.
    """
    j = tree.containing(columns)
    if j >= 0:
        return project(marginals[j], tree.cliques[j], columns)
    operands: list[Any] = [marginals[0], list(tree.cliques[0])]
    for k in range(1, len(tree.cliques)):
        clique, sep = tree.cliques[k], tree.separator(k)
        below = project(marginals[k], clique, sep).reshape(broadcast_shape(sep, clique, tree.sizes))
        cond = np.divide(marginals[k], below, out=np.zeros_like(marginals[k]), where=below > 0)
        operands += [cond, list(clique)]
    out: Table = np.einsum(*operands, list(columns), optimize="greedy")
    return out
