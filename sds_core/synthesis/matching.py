"""Record matching: move synthetic records towards their own DP aggregates, within the guarantee.

The last step of aggregate-seeded synthesis (:mod:`sds_core.synthesis.generator`,
``SynthesisParams.match_aggregates``). A local search over the records' cells lowers the squared
gap between the records' combination counts and the DP counts (1-, 2- and 3-way, weighted by
length) and never creates a combination the aggregates do not report, so records that hold no
unreported combination of length <= R keep holding none. It reads only the records and the (DP)
aggregates: post-processing, no privacy budget. docs/synthesis.md measures it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from sds_core.data.table import PreparedTable
from sds_core.errors import require
from sds_core.marginals.aggregates import AggregateSet
from sds_core.synthesis._matching_kernel import MatchState, count_synthetic, match_pass, subsets
from sds_core.synthesis.layout import Layout, build_layout

__all__ = [
    "KICKS",
    "MAX_PASSES",
    "MAX_VISITS",
    "WEIGHT_BY_LEN",
    "MatchStats",
    "match_aggregates",
    "match_records",
    "tolerance",
]

WEIGHT_BY_LEN = (1.0, 1.0, 0.0)
"""Objective weight of a combination of length 1, 2, 3 (longer ones: the last value). Length 3
at 0: its terms improved TVD3 a little (docs/synthesis.md) but cost 4 of every 5 lookups; its
combinations are still never fabricated (validity is checked, from the bitsets)."""
EMPTY_WEIGHT = 1.0
"""Objective weight of a column's empty cells against records - the column's DP 1-counts."""
KICKS = True
"""A value further below its DP 1-count than the cell's may enter by emptying one other cell."""
MAX_PASSES = 3
"""Passes over all records at most."""
TOLERANCE_Z = 1.0
"""With the published noise: gaps within this many noise standard deviations cost nothing."""
MAX_VISITS = 300_000
"""Record visits per batch at most: as many whole passes as fit (up to ``passes``), else one
pass over that many records drawn at random (a batch of 1M records: 30% of them)."""
STOP_SHARE = 0.002
"""A pass that moves fewer cells than this share of the records ends the search."""


class MatchStats(NamedTuple):
    """What :func:`match_records` did: passes run, cells moved, candidates looked up, kicks
    (a value entering by emptying blocking cells) evaluated and made."""

    passes: int
    moves: int
    candidates: int
    kicks_tried: int
    kicks_made: int


def match_aggregates(
    table: PreparedTable,
    aggregates: AggregateSet,
    *,
    rng: np.random.Generator,
    passes: int = MAX_PASSES,
    noise_sd_by_len: Sequence[float] | None = None,
) -> PreparedTable:
    """The records, moved cell by cell towards the DP counts without unreported combinations.

    :func:`match_records` on a table (synthesis runs it on each batch's records, see
    :func:`sds_core.synthesis.generator.run_batch`).

    Args:
        table: synthetic records over ``aggregates.domain`` (codes, -1 = empty).
        aggregates: the (DP) aggregates the records were built from; read, never changed.
        rng: source of the visiting orders.
        passes: most passes over the records (>= 0; 0 returns the table unchanged).
        noise_sd_by_len: the published noise standard deviation of a count of each length
            (σ_k·√Δ_k, the manifest's ``noise_sd``); gaps within :data:`TOLERANCE_Z` of them
            cost nothing. None: every gap counts.

    Returns:
        A new PreparedTable (same domain, record count and multi-value columns).
    """
    require(
        table.domain == aggregates.domain,
        "the records must use the aggregates' domain (same columns and values)",
    )
    dom = aggregates.domain
    if table.n_records == 0 or len(aggregates.counts_of(1)) == 0:
        return table
    offsets = np.asarray(dom.offsets[:-1], dtype=np.int64)
    ids = np.where(table.codes >= 0, table.codes.astype(np.int64) + offsets[None, :], -1)
    tol = None if noise_sd_by_len is None else tolerance(noise_sd_by_len, TOLERANCE_Z)
    match_records(ids, build_layout(aggregates, None), rng=rng, passes=passes, tolerance_by_len=tol)
    codes = np.where(ids >= 0, ids - offsets[None, :], -1).astype(np.int32)
    return PreparedTable(dom, codes, table.multi_value_columns)


def match_records(
    ids: NDArray[np.int64],
    lay: Layout,
    *,
    rng: np.random.Generator,
    passes: int = MAX_PASSES,
    tolerance_by_len: Sequence[float] | None = None,
    scale: float = 1.0,
) -> MatchStats:
    """Move the records ``ids`` (attribute ids, -1 = empty) towards ``lay``'s counts, in place.

    Each pass visits the records in a seeded random order and each of their cells; a cell takes
    the value (or "empty") that lowers ``sum_k w_k * sum_c (synthetic_c - DP_c) ** 2`` the most
    (c over the reported combinations of length k, ``w`` = :data:`WEIGHT_BY_LEN`, plus each
    column's empty cells against ``records - sum of the column's 1-counts`` at weight w_1),
    among the values whose every combination with < R of the record's other attributes is
    reported. With :data:`KICKS`, a value further below its 1-count than the cell's may also
    enter by emptying one other cell that blocks it. Passes stop when one moves fewer cells
    than :data:`STOP_SHARE` of the records, or after ``passes``, visiting at most
    :data:`MAX_VISITS` records in all. With ``tolerance_by_len`` (t_k
    for k = 1..R, see :func:`tolerance`), a gap within t_k of the DP count costs nothing: the
    term is max(|gap| - t_k, 0) ** 2. ``scale`` multiplies every count of ``lay`` first (the
    records a target asks for per record of a budget cycle: 1 for the DP record count).

    Returns:
        What the search did (:class:`MatchStats`).
    """
    require(passes >= 0, f"passes must be >= 0, got {passes}")
    require(scale > 0, f"scale must be > 0, got {scale}")
    n, n_cols = ids.shape
    if n == 0 or passes == 0:
        return MatchStats(0, 0, 0, 0, 0)
    col_filled = np.bincount(lay.attr_col, weights=lay.budget.astype(np.float64), minlength=n_cols)
    st = MatchState(
        syn=np.zeros(lay.counts.size, dtype=np.int64),
        weight_by_len=weight_by_len(lay.reporting_length),
        empty_count=(ids < 0).sum(axis=0).astype(np.int64),
        empty_target=np.maximum(float(n) - scale * col_filled, 0.0),
        tolerance_by_len=_tolerance_array(tolerance_by_len, lay.reporting_length),
        scale=float(scale),
    )
    sets = subsets(n_cols - 1, lay.reporting_length)
    count_synthetic(ids, lay, st.syn, sets, _counted_size(st.weight_by_len, lay))
    stats = np.zeros(4, dtype=np.int64)
    done = 0
    visits = MAX_VISITS  # bounded work: whole passes while they fit, else a random subset
    for _ in range(min(passes, max(1, visits // n))):
        order = rng.permutation(n)[: min(n, visits)].astype(np.int64)
        moves = int(match_pass(ids, order, lay, st, sets, KICKS, stats))
        done += 1
        if moves < STOP_SHARE * n:
            break
    return MatchStats(done, int(stats[3]), int(stats[0]), int(stats[1]), int(stats[2]))


def _counted_size(weights: NDArray[np.float64], lay: Layout) -> int:
    """Largest subset size (combination length - 1) whose synthetic counts the search reads:
    lengths of weight 0 beyond 2 are skipped when the bitsets prove validity (as the kernel)."""
    look = lay.reporting_length - 1
    if lay.bitsets.enabled and lay.reporting_length <= 3:
        while look > 1 and weights[look + 1] == 0.0:
            look -= 1
    return look


def tolerance(noise_sd_by_len: Sequence[float], z: float = TOLERANCE_Z) -> tuple[float, ...]:
    """The gaps matching leaves alone: ``z`` noise standard deviations per length.

    >>> tolerance([2.0, 3.0])
    (2.0, 3.0)
    """
    require(z >= 0, f"z must be >= 0, got {z}")
    return tuple(z * float(s) for s in noise_sd_by_len)


def _tolerance_array(tol: Sequence[float] | None, reporting_length: int) -> NDArray[np.float64]:
    """``tol`` as the kernel reads it: index k = length (0 unused); zeros when None."""
    out = np.zeros(reporting_length + 1, dtype=np.float64)
    if tol is not None:
        require(
            len(tol) >= reporting_length,
            f"one tolerance per length 1..{reporting_length}, got {len(tol)}",
        )
        require(all(t >= 0 for t in tol), f"tolerances must be >= 0, got {list(tol)}")
        out[1:] = np.asarray(tol[:reporting_length], dtype=np.float64)
    return out


def weight_by_len(reporting_length: int) -> NDArray[np.float64]:
    """:data:`WEIGHT_BY_LEN` as the kernel reads it: index k = length, index 0 the empty cells'
    weight (:data:`EMPTY_WEIGHT`).

    >>> weight_by_len(4).tolist()
    [1.0, 1.0, 1.0, 0.0, 0.0]
    """
    w = np.zeros(reporting_length + 1, dtype=np.float64)
    w[0] = EMPTY_WEIGHT
    for k in range(1, reporting_length + 1):
        w[k] = WEIGHT_BY_LEN[min(k, len(WEIGHT_BY_LEN)) - 1]
    return w
