"""The junction tree of a model: cliques of columns, each attached to an earlier clique.

Columns are indexed 0..d-1 and every column has ``sizes[i]`` categories (a released column's
values plus one "empty" category). The tree is built by attaching each clique to a parent clique
that contains its separator, so the running-intersection property holds by construction. Its
memory is known before any fitting (:func:`model_cells`, :func:`check_model_size`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sds_core.errors import SdsInputError, invariant

Clique = tuple[int, ...]
"""Column indices, ascending."""

BYTES_PER_CELL = 48
"""Working memory per clique cell while fitting: potentials, beliefs, marginals, gradient,
the line-search copy and one temporary (six float64 arrays)."""

DEFAULT_MAX_MODEL_BYTES = 2 * 1024**3
"""Default limit on the fitted model's working memory (2 GiB)."""


@dataclass(frozen=True, slots=True)
class JunctionTree:
    """Cliques in topological order; clique j > 0 hangs under ``parents[j]`` (< j).

    Args:
        sizes: number of categories of every column.
        cliques: ascending column tuples; together they cover every column.
        parents: ``parents[0] == -1``; for j > 0 the index of an earlier clique containing the
            separator ``cliques[j] & cliques[parents[j]]``, which must hold every column of
            clique j already seen in cliques 0..j-1.

    >>> t = JunctionTree((2, 3, 2), ((0, 1), (1, 2)), (-1, 0))
    >>> t.separator(1), t.cells, t.clique_shape(1)
    ((1,), 12, (3, 2))
    """

    sizes: tuple[int, ...]
    cliques: tuple[Clique, ...]
    parents: tuple[int, ...]

    def __post_init__(self) -> None:
        invariant(len(self.cliques) == len(self.parents) > 0, "one parent per clique")
        invariant(all(s >= 1 for s in self.sizes), f"sizes must be >= 1, got {self.sizes}")
        seen: set[int] = set()
        for j, (clique, parent) in enumerate(zip(self.cliques, self.parents, strict=True)):
            invariant(list(clique) == sorted(set(clique)), f"clique {clique} not ascending")
            invariant(all(0 <= c < len(self.sizes) for c in clique), f"bad clique {clique}")
            if j == 0:
                invariant(parent == -1, "the root has no parent")
            else:
                invariant(0 <= parent < j, f"clique {j} needs an earlier parent, got {parent}")
                shared = set(clique) & seen
                invariant(
                    shared <= set(self.cliques[parent]),
                    f"clique {clique}: columns {sorted(shared)} seen before are not all in its "
                    f"parent {self.cliques[parent]} (running intersection)",
                )
            seen |= set(clique)
        invariant(seen == set(range(len(self.sizes))), "the cliques must cover every column")

    def separator(self, j: int) -> Clique:
        """Columns clique ``j`` shares with its parent (empty for the root)."""
        if j == 0:
            return ()
        parent = set(self.cliques[self.parents[j]])
        return tuple(c for c in self.cliques[j] if c in parent)

    def clique_shape(self, j: int) -> tuple[int, ...]:
        """Table shape of clique ``j``."""
        return tuple(self.sizes[c] for c in self.cliques[j])

    def children(self, j: int) -> tuple[int, ...]:
        """Cliques attached to clique ``j``."""
        return tuple(i for i, p in enumerate(self.parents) if p == j)

    @property
    def cells(self) -> int:
        """Total number of clique cells (what fitting holds in memory, times BYTES_PER_CELL)."""
        return model_cells(self.sizes, self.cliques)

    def containing(self, columns: Sequence[int]) -> int:
        """Index of the smallest clique containing all ``columns`` (-1 when none)."""
        want = set(columns)
        best, best_cells = -1, math.inf
        for j, clique in enumerate(self.cliques):
            if want <= set(clique):
                cells = math.prod(self.clique_shape(j))
                if cells < best_cells:
                    best, best_cells = j, cells
        return best


def model_cells(sizes: Sequence[int], cliques: Sequence[Sequence[int]]) -> int:
    """Total cells of the tables of ``cliques`` over columns of ``sizes`` categories.

    >>> model_cells((3, 4, 5), [(0, 1), (1, 2)])
    32
    """
    return sum(math.prod(sizes[c] for c in clique) for clique in cliques)


def model_bytes(sizes: Sequence[int], cliques: Sequence[Sequence[int]]) -> int:
    """Working memory of fitting a model with these cliques (:data:`BYTES_PER_CELL` per cell)."""
    return BYTES_PER_CELL * model_cells(sizes, cliques)


def check_model_size(
    sizes: Sequence[int],
    cliques: Sequence[Sequence[int]],
    names: Sequence[str],
    max_bytes: int,
    *,
    what: str = "the model",
) -> int:
    """The model's working memory in bytes; SdsInputError naming the big columns if too large.

    Args:
        sizes: categories per column (values + empty).
        cliques: the cliques the model would hold.
        names: column names (for the message).
        max_bytes: the configured limit (``max_model_bytes``).
        what: what is being sized, for the message.

    Raises:
        SdsInputError: above ``max_bytes``; the message lists the largest cliques with their
            columns' sizes and says what to do (bin, drop a column, lower R, raise the limit).
    """
    need = model_bytes(sizes, cliques)
    if need <= max_bytes:
        return need
    ranked = sorted(cliques, key=lambda c: -math.prod(sizes[i] for i in c))[:3]
    worst = "; ".join(
        " x ".join(f"{names[i]} ({sizes[i]} values)" for i in clique)
        + f" = {math.prod(sizes[i] for i in clique):,} cells"
        for clique in ranked
    )
    raise SdsInputError(
        f"{what} would need {need / 2**20:,.0f} MiB (~{BYTES_PER_CELL} bytes per table cell), "
        f"above max_model_bytes = {max_bytes / 2**20:,.0f} MiB. Largest tables: {worst}. Bin "
        "or coarsen those columns (e.g. bins = { dp_quantiles = 10 } in the schema), drop one "
        "with use_columns, lower the reporting length, or raise max_model_bytes if the memory "
        "is there. Nothing was charged."
    )


def tree_of_cliques(sizes: Sequence[int], cliques: Sequence[Sequence[int]]) -> JunctionTree:
    """A junction tree whose cliques cover every one of ``cliques`` (and every column).

    Triangulates the graph joining the columns of each clique by greedy elimination (the column
    whose neighbourhood table is smallest first), keeps the maximal elimination cliques and joins
    them by a maximum-weight spanning tree on separator size (Prim), which has the running
    intersection property. Used by ``aim``, whose measured cliques are any sets of columns.

    >>> tree_of_cliques((2, 2, 2, 2), [(0, 1), (1, 2), (2, 3), (0, 3)]).cliques
    ((0, 1, 3), (1, 2, 3))
    """
    d = len(sizes)
    graph: dict[int, set[int]] = {i: set() for i in range(d)}
    for clique in cliques:
        for a in clique:
            graph[a] |= set(clique) - {a}
    found: list[Clique] = []
    while graph:
        v = min(graph, key=lambda u: (math.prod(sizes[w] for w in graph[u] | {u}), u))
        near = graph.pop(v)
        found.append(tuple(sorted(near | {v})))
        for a in near:
            graph[a] |= near - {a}
            graph[a].discard(v)
    maximal = sorted(
        {c for c in found if not any(set(c) < set(o) for o in found)},
        key=lambda c: (-math.prod(sizes[i] for i in c), c),
    )
    order, parents = [maximal[0]], [-1]
    rest = maximal[1:]
    while rest:
        k, p = max(
            ((k, p) for k in range(len(rest)) for p in range(len(order))),
            key=lambda kp: (len(set(rest[kp[0]]) & set(order[kp[1]])), -kp[0], -kp[1]),
        )
        order.append(rest.pop(k))
        parents.append(p)
    return JunctionTree(tuple(sizes), tuple(order), tuple(parents))
