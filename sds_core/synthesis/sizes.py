"""The synthesis's size limits, from the number of columns and values alone (no data, no counts).

Aggregate-seeded records need combination keys that fit in int64 and candidate tables of
attributes x sub-combinations (:func:`check_synthesis_size`); the consistent model needs working
memory for its cliques (:func:`worst_case_model_bytes`). Both are functions of the columns'
sizes and the reporting length only, so a release checks them on an upper bound of its released
domain before anything is charged (``sds_release.store.config.planned.check_synthesis_sizes``), and
the synthesis (:mod:`sds_core.synthesis.generator`, :mod:`sds_core.synthesis.layout`,
:mod:`sds_core.synthesis.consistent`) applies the same rules to the domain it is given.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from sds_core.errors import SdsInputError
from sds_core.model.structure import DEFAULT_MAX_MODEL_BYTES, Clique, check_model_size

__all__ = [
    "DEFAULT_MAX_CLIQUE_CELLS",
    "DEFAULT_MAX_CLIQUE_COLUMNS",
    "MAX_CANDIDATE_CELLS",
    "check_key_width",
    "check_synthesis_size",
    "sub_combinations",
    "worst_case_model_bytes",
]

MAX_CANDIDATE_CELLS = 64_000_000
"""Upper bound on attributes x sub-combinations per attribute held while building a record."""

DEFAULT_MAX_CLIQUE_CELLS = 1_000_000
"""A clique of the consistent model holds at most this many cells (``ModelParams``)."""

DEFAULT_MAX_CLIQUE_COLUMNS = 4
"""A clique of the consistent model holds at most this many columns (``ModelParams``)."""


def check_key_width(n_attributes: int, reporting_length: int) -> None:
    """Refuse a domain whose combination keys (base ``n_attributes + 1``, ``reporting_length``
    digits) would overflow int64. The margin is the marginals engine's
    (:func:`~sds_core.marginals.aggregates.encode_keys`, which normalizes the aggregates with
    keys of base ``n_attributes``), so a domain that passes here passes there too.

    Raises:
        SdsInputError: naming the attributes, R and the fixes.
    """
    if reporting_length * math.log2(n_attributes + 1) >= 62.5:
        raise SdsInputError(
            f"{n_attributes} attributes with reporting_length {reporting_length}: combination "
            "keys overflow int64; bin or merge high-cardinality columns, or lower the reporting "
            "length"
        )


def sub_combinations(n_columns: int, reporting_length: int) -> int:
    """Most sub-combinations (length <= R) one candidate attribute can hold.

    >>> sub_combinations(11, 3)
    56
    """
    return max(1, sum(math.comb(n_columns - 1, j) for j in range(reporting_length)))


def check_synthesis_size(n_columns: int, n_attributes: int, reporting_length: int) -> None:
    """Refuse a domain too large for aggregate-seeded records at reporting length R: combination
    keys that overflow int64 (:func:`check_key_width`), or more attributes x sub-combinations
    than :data:`MAX_CANDIDATE_CELLS`.

    >>> check_synthesis_size(11, 120, 3)

    Raises:
        SdsInputError: naming the sizes and the fixes.
    """
    check_key_width(n_attributes, reporting_length)
    sub_cap = sub_combinations(n_columns, reporting_length)
    if n_attributes * sub_cap > MAX_CANDIDATE_CELLS:
        raise SdsInputError(
            f"{n_attributes} attributes x {sub_cap} sub-combinations per candidate exceed the "
            f"synthesis working-memory bound ({MAX_CANDIDATE_CELLS}); lower the reporting "
            "length or bin high-cardinality columns"
        )


def worst_case_model_bytes(
    columns: Sequence[str],
    cardinalities: Sequence[int],
    reporting_length: int,
    *,
    max_model_bytes: int = DEFAULT_MAX_MODEL_BYTES,
    max_clique_cells: int = DEFAULT_MAX_CLIQUE_CELLS,
    max_clique_columns: int = DEFAULT_MAX_CLIQUE_COLUMNS,
) -> int:
    """An upper bound on the consistent model's working memory, from columns of
    ``cardinalities`` values (any upper bound of the published values: a domain holding every
    one, a declared schema); the keywords are the model's ``ModelParams``.

    Every column after the first enters the model in one clique of at most
    ``max_clique_columns`` columns and at most ``max_clique_cells`` cells; the bound takes the
    largest such clique for each column. Called before anything is charged.

    Raises:
        SdsInputError: the bound is above ``max_model_bytes`` (names the columns).
    """
    sizes = tuple(k + 1 for k in cardinalities)
    width = max_clique_columns if reporting_length >= 2 else 2
    cliques: list[Clique] = []
    for v in range(len(sizes)):
        others = sorted((c for c in range(len(sizes)) if c != v), key=lambda c: -sizes[c])
        best: Clique = (v,)
        for r in range(1, width):
            for extra in itertools.combinations(others, r):
                clique = tuple(sorted((v, *extra)))
                cells = math.prod(sizes[c] for c in clique)
                if cells <= max_clique_cells and cells > math.prod(sizes[c] for c in best):
                    best = clique
        cliques.append(best)
    return check_model_size(
        sizes,
        cliques,
        columns,
        max_model_bytes,
        what="the consistent model of the DP aggregates (synthesis = 'model')",
    )
