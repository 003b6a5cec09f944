"""The consistent model's ``pair-dependence`` structure: a junction tree from pairwise dependence.

:func:`pair_dependence` scores every column pair by how far its published 2-way table is from
independence (L1, in records) minus what the noise alone would produce; :func:`tree_by_pairs`
grows a junction tree that puts the strongest pairs inside cliques. Post-processing of the
published aggregates only (``sds_core.synthesis.consistent`` calls it for
``ModelParams(structure="pair-dependence")``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from sds_core.errors import invariant
from sds_core.model.structure import Clique, JunctionTree

_MEAN_ABS_NORMAL = math.sqrt(2 / math.pi)
"""E|Z| for a standard normal Z: the expected absolute noise of one count, in noise sd."""


def pair_dependence(
    d: int,
    full_table: Callable[[Clique], NDArray[np.float64]],
    published_cells: Callable[[Clique], int],
    noise_sd: float,
) -> NDArray[np.float64]:
    """(d, d) symmetric weights: each pair's L1 distance from independence, net of noise.

    For columns a, b with estimated table T (empty category included, ``full_table``) of N
    records: Σ |T_ab − T_a·T_b / N| minus the expected Σ|noise| of its published cells,
    ``√(2/π)·noise_sd·published_cells``. It is the number of records the model misplaces in
    that pair's table if it keeps the two columns independent, so the tree keeps the pairs
    that carry the most records, not (as a G-statistic does) the most significant ones, which
    favours high-cardinality columns whose many noisy cells look dependent.

    >>> t = {(0, 1): np.array([[40.0, 0.0], [0.0, 60.0]])}
    >>> w = pair_dependence(2, t.__getitem__, lambda pair: 4, 0.0)
    >>> float(w[0, 1]), float(w[1, 0]), float(w[0, 0])
    (96.0, 96.0, 0.0)
    """
    out = np.zeros((d, d))
    for a, b in itertools.combinations(range(d), 2):
        table = full_table((a, b))
        total = float(table.sum())
        if total <= 0:
            continue
        independent = np.outer(table.sum(axis=1), table.sum(axis=0)) / total
        dependence = float(np.abs(table - independent).sum())
        noise = _MEAN_ABS_NORMAL * noise_sd * published_cells((a, b))
        out[a, b] = out[b, a] = dependence - noise
    return out


def tree_by_pairs(
    weights: NDArray[np.float64],
    sizes: Sequence[int],
    *,
    max_clique_columns: int,
    max_clique_cells: int,
    max_model_cells: int,
) -> JunctionTree:
    """A junction tree of cliques of up to ``max_clique_columns`` columns, grown greedily.

    Start from the heaviest pair; then repeatedly attach the unplaced column v and separator S
    (1 to ``max_clique_columns`` − 1 columns of one existing clique) maximising Σ_{s∈S} w(v, s),
    where every s of a separator wider than one column has w(v, s) > 0 (no cells for pairs
    that carry nothing); ties go to the smaller separator table. Cliques stay within
    ``max_clique_cells`` and the model within ``max_model_cells``; a column that fits nowhere
    enters alone.

    >>> w = np.array([[0, 5, 1], [5, 0, 2], [1, 2, 0]], dtype=float)
    >>> tree_by_pairs(w, (2, 2, 2), max_clique_columns=3, max_clique_cells=100,
    ...               max_model_cells=100).cliques
    ((0, 1), (0, 1, 2))
    """
    d = len(sizes)
    invariant(weights.shape == (d, d), f"weights of shape {weights.shape} for {d} columns")
    if d == 1:
        return JunctionTree(tuple(sizes), ((0,),), (-1,))
    used = 0

    def cells(cols: Sequence[int]) -> int:
        return math.prod(sizes[c] for c in cols)

    def fits(cols: Sequence[int]) -> bool:
        return cells(cols) <= max_clique_cells and used + cells(cols) <= max_model_cells

    pairs = [p for p in itertools.combinations(range(d), 2) if fits(p)]
    first: Clique = max(pairs, key=lambda p: (weights[p], -p[0], -p[1])) if pairs else (0,)
    cliques: list[Clique] = [first]
    parents = [-1]
    placed = set(first)
    used = cells(first)
    while len(placed) < d:
        best: tuple[tuple[float, int], int, Clique, int] | None = None
        for v in sorted(set(range(d)) - placed):
            for j, clique in enumerate(cliques):
                for r in range(1, min(max_clique_columns - 1, len(clique)) + 1):
                    for sep in itertools.combinations(clique, r):
                        if r > 1 and any(weights[v, s] <= 0 for s in sep):
                            continue
                        if not fits((*sep, v)):
                            continue
                        key = (float(sum(weights[v, s] for s in sep)), -cells(sep))
                        if best is None or key > best[0]:
                            best = (key, v, sep, j)
        if best is None:
            v = min(set(range(d)) - placed)
            cliques.append((v,))
            parents.append(0)
        else:
            _, v, sep, j = best
            cliques.append(tuple(sorted((*sep, v))))
            parents.append(j)
        used += cells(cliques[-1])
        placed.add(v)
    return JunctionTree(tuple(sizes), tuple(cliques), tuple(parents))
