"""DP bin edges for numeric columns: quantiles chosen by the exponential mechanism.

``bins = { dp_quantiles = q }`` in a schema asks for q bins of about equal mass. Each of the
q − 1 inner edges is chosen among public candidates (a grid over the column's declared
[min, max]) by the exponential mechanism with utility −|#{x < c} − (i/q)·n| (sensitivity 1
under adding or removing a record), so the bins cost a visible ε and leak nothing more.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from sds_core.data.preparation import MISSING_ID_MESSAGE
from sds_core.data.readers import cell_text
from sds_core.data.text import match_key
from sds_core.dp.randomness import ReleaseRandomness
from sds_core.errors import SdsInputError

MAX_CANDIDATES = 1024
"""Inner candidate edges per column: the integers of the range when few, else a regular grid."""


def candidate_edges(lower: float, upper: float, *, integer: bool) -> NDArray[np.float64]:
    """The public candidates for inner edges strictly between ``lower`` and ``upper``.

    >>> candidate_edges(0, 5, integer=True).tolist()
    [1.0, 2.0, 3.0, 4.0]
    """
    if not (math.isfinite(lower) and math.isfinite(upper) and lower < upper):
        raise SdsInputError(f"DP quantile bins need finite min < max, got [{lower}, {upper}]")
    if integer and upper - lower - 1 <= MAX_CANDIDATES:
        return np.arange(math.floor(lower) + 1, math.ceil(upper), dtype=np.float64)
    grid = np.linspace(lower, upper, MAX_CANDIDATES + 2)[1:-1]
    return np.unique(np.round(grid)) if integer else grid


def dp_quantile_edges(
    values: NDArray[np.float64],
    *,
    lower: float,
    upper: float,
    bins: int,
    epsilon: float,
    integer: bool,
    rnd: ReleaseRandomness,
    label: str,
    stage: str,
) -> tuple[float, ...]:
    """Edges ``(lower, e_1, ..., e_{q-1}, upper)`` of about equal-mass bins, ε-DP.

    Each inner edge is one exponential mechanism at ε/(q − 1) (sequential composition over the
    q − 1 edges; each is ε_i-bounded-range, hence ε_i²/8-zCDP). Selection is Gumbel-max on
    uniforms from the keyed stream ``label/i``. Edges chosen twice collapse (fewer bins).

    Args:
        values: the column's non-empty numbers (sensitive), inside [lower, upper].
        lower, upper: the declared (public) range of the column.
        bins: q >= 2.
        epsilon: this column's budget (> 0).
        integer: the column holds integers (candidates are integers).
        rnd, label, stage: the release randomness, the stream label and the owning stage.

    Raises:
        SdsInputError: bins < 2, ε not > 0, bad range.
    """
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 2:
        raise SdsInputError(f"dp_quantiles must be an integer >= 2, got {bins!r}")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise SdsInputError(f"the binning epsilon must be > 0, got {epsilon!r}")
    cand = candidate_edges(lower, upper, integer=integer)
    x = np.sort(np.asarray(values, dtype=np.float64))
    below = np.searchsorted(x, cand, side="left").astype(np.float64)
    eps_i = epsilon / (bins - 1)
    chosen = []
    for i in range(1, bins):
        utility = -np.abs(below - i / bins * x.size)
        words = rnd.words(f"{label}/{i}", cand.size, stage=stage)
        u = ((words >> np.uint64(11)).astype(np.float64) + 0.5) / 2.0**53
        chosen.append(float(cand[int(np.argmax(eps_i * utility / 2 - np.log(-np.log(u))))]))
    inner = sorted(set(chosen))
    return (float(lower), *inner, float(upper))


def subject_numbers(
    values: NDArray[np.float64], subjects: Sequence[object], *, subject_column: str
) -> tuple[list[str], NDArray[np.float64]]:
    """One number per subject: what :func:`dp_quantile_edges` reads when ``subject_id`` is set.

    The quantile utility has sensitivity 1 per *record*; a subject with m rows would move it by
    m. The subject join (:func:`sds_core.data.preparation.prepare`) turns a subject's rows into
    one record, whose binned column holds one value (rows that fall in different bins are a
    conflict the join refuses), so the mechanism reads one number per subject too: the smallest
    of its rows' numbers (any choice within the subject keeps sensitivity 1; the minimum does
    not depend on row order or partitioning). Subjects without a number are left out, as rows
    without one are.

    Args:
        values: the column's parsed numbers per row (NaN: empty or not a number).
        subjects: the subject-id cell of each row (None: missing; matched as the join
            matches them: as text, trimmed, case-insensitive).
        subject_column: the subject-id column's name (messages).

    Returns:
        The subjects' keys (sorted) and their numbers, aligned. Applied again to the output of
        several partitions it gives the same result as on the whole column (a min of minima).

    Raises:
        SdsInputError: a row without a subject id (the join refuses it as well).

    >>> keys, nums = subject_numbers(np.array([5.0, 7.0, np.nan, 3.0]), ["a", "A ", "b", "c"],
    ...                              subject_column="id")
    >>> keys, nums.tolist()
    (['a', 'c'], [5.0, 3.0])
    """
    import pandas as pd

    v = np.asarray(values, dtype=np.float64)
    if len(subjects) != v.shape[0]:
        raise SdsInputError(
            f"subject_numbers: {v.shape[0]} values but {len(subjects)} subject ids; pass one of "
            "each per row"
        )
    cells, distinct = pd.factorize(np.asarray(subjects, dtype=object))  # missing: -1
    texts = [match_key(cell_text(t)) for t in distinct.tolist()]
    if (cells < 0).any() or "" in texts:
        raise SdsInputError(
            f"{MISSING_ID_MESSAGE} (subject_id column {subject_column!r}); fill in or drop "
            "those rows"
        )
    of_text, keys = pd.factorize(np.asarray(texts, dtype=object))  # "A " and "a": one subject
    subject = of_text[cells]
    numeric = ~np.isnan(v)
    smallest = np.full(len(keys), np.inf)
    np.minimum.at(smallest, subject[numeric], v[numeric])
    has = np.zeros(len(keys), dtype=bool)
    has[subject[numeric]] = True
    names = [str(k) for k in keys.tolist()]
    order = sorted(np.flatnonzero(has).tolist(), key=names.__getitem__)
    return [names[i] for i in order], smallest[order]


def quantile_rho(epsilon: float, bins: int) -> float:
    """zCDP of one column's q − 1 bounded-range selections at ε/(q − 1) each.

    >>> round(quantile_rho(1.0, 5), 6)
    0.03125
    """
    return (bins - 1) * (epsilon / (bins - 1)) ** 2 / 8
