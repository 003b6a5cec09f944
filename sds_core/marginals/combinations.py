"""Combination machinery shared by exact and DP aggregation: cliques, local keys, candidates.

A *clique* is a tuple of k ascending column indices; inside a clique a combination has a
mixed-radix *local key* built from its codes, which is how records are counted without
Python loops. :func:`candidates_from_survivors` builds the DP candidate set V_k from the
surviving (k−1)-tuples (spec §1.5 step 1) and :class:`CliqueLookup` maps records to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

import numpy as np
from numpy.typing import NDArray

from sds_core.data.domain import Domain
from sds_core.errors import invariant
from sds_core.marginals._kernels import (
    HAVE_NUMBA,
    JoinPlan,
    clique_order,
    join_fill,
    join_keep,
    present_attributes,
    row_local_keys,
    rows_ascending,
)
from sds_core.marginals.aggregates import CombinationCounts, encode_keys

DENSE_CLIQUE_LIMIT = 1 << 25
"""Largest clique (product of cardinalities + 1) that may use a dense lookup/count array."""

SMALL_CLIQUE = 1 << 20
"""Cliques up to this size are always dense; larger ones only when the data is big enough."""


def use_dense(size: int, n_records: int, used: int, budget: int) -> bool:
    """Dense array for a clique of ``size`` entries? (small, or big data; within the budget)."""
    if size > DENSE_CLIQUE_LIMIT or used + size > budget:
        return False
    return size <= SMALL_CLIQUE or size <= 16 * n_records


def clique_multipliers(domain: Domain, cols: tuple[int, ...]) -> tuple[NDArray[np.int64], int]:
    """Mixed-radix multipliers of a clique's local keys and the key range (clique size).

    A local key has one digit per column, ``code + 1`` in radix ``cardinality + 1``: digit 0
    means "empty", so records with an empty cell get keys that no combination has.
    """
    radix = [domain.cardinalities[c] + 1 for c in cols]
    mult = np.ones(len(cols), dtype=np.int64)
    for i in range(len(cols) - 2, -1, -1):
        mult[i] = mult[i + 1] * radix[i + 1]
    size = int(mult[0]) * radix[0] if cols else 1
    return mult, size


def shifted_columns(codes: NDArray[np.int32]) -> NDArray[np.int64]:
    """(n_columns, n) contiguous ``code + 1`` digits of a partition, computed once per partition."""
    return np.ascontiguousarray(codes.T, dtype=np.int64) + 1


def local_keys(
    shifted: NDArray[np.int64], cols: tuple[int, ...], mult: NDArray[np.int64]
) -> NDArray[np.int64]:
    """Local key of every record's combination in the clique (see :func:`clique_multipliers`).

    Keys of records with an empty cell in the clique contain a zero digit: use
    :func:`valid_keys` to drop them, or look them up among combination keys (never found).
    """
    key: NDArray[np.int64] = shifted[cols[-1]].copy()
    for i in range(len(cols) - 1):
        key += shifted[cols[i]] * mult[i]
    return key


def valid_keys(domain: Domain, cols: tuple[int, ...], keys: NDArray[np.int64]) -> NDArray[np.bool_]:
    """Which local keys have no zero (empty) digit."""
    mult, _ = clique_multipliers(domain, cols)
    ok = np.ones(keys.shape[0], dtype=bool)
    for i, c in enumerate(cols):
        ok &= (keys // mult[i]) % (domain.cardinalities[c] + 1) != 0
    return ok


def keys_to_attrs(
    domain: Domain, cols: tuple[int, ...], keys: NDArray[np.int64]
) -> NDArray[np.int32]:
    """Global attribute ids (m, k) of the combinations with these (valid) local keys."""
    mult, _ = clique_multipliers(domain, cols)
    out = np.empty((keys.shape[0], len(cols)), dtype=np.int32)
    for i, c in enumerate(cols):
        digit = (keys // mult[i]) % (domain.cardinalities[c] + 1)
        out[:, i] = digit - 1 + domain.offsets[c]
    return out


def attrs_to_local(
    domain: Domain, cols: tuple[int, ...], attrs: NDArray[np.integer]
) -> NDArray[np.int64]:
    """Inverse of :func:`keys_to_attrs` for combinations of this clique."""
    mult, _ = clique_multipliers(domain, cols)
    key = np.zeros(attrs.shape[0], dtype=np.int64)
    for i, c in enumerate(cols):
        key += (attrs[:, i].astype(np.int64) - domain.offsets[c] + 1) * mult[i]
    return key


def group_by_clique(
    domain: Domain, attrs: NDArray[np.integer]
) -> list[tuple[tuple[int, ...], NDArray[np.int64]]]:
    """Split combination rows by clique: ``[(cols, row indices ascending)]`` in clique order."""
    if attrs.shape[0] == 0:
        return []
    n_cliques = comb(domain.n_columns, attrs.shape[1])
    if HAVE_NUMBA and n_cliques <= MAX_COUNTING_SORT:
        groups = _group_by_rank(domain, attrs, n_cliques)
        if groups is not None:
            return groups
    cols = domain.attribute_columns()[attrs]
    ckeys = encode_keys(cols, max(domain.n_columns, 2))
    order = np.argsort(ckeys, kind="stable")
    sorted_keys = ckeys[order]
    bounds = np.flatnonzero(np.diff(sorted_keys)) + 1
    starts = np.concatenate(([0], bounds))
    ends = np.concatenate((bounds, [order.shape[0]]))
    return [
        (tuple(int(c) for c in cols[order[s]]), order[s:e].astype(np.int64))
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True)
    ]


MAX_COUNTING_SORT = 1 << 22
"""Most cliques of one length for which :func:`group_by_clique` uses a counting sort."""


def _group_by_rank(
    domain: Domain, attrs: NDArray[np.integer], n_cliques: int
) -> list[tuple[tuple[int, ...], NDArray[np.int64]]] | None:
    """:func:`group_by_clique` by a stable counting sort on each row's colex clique rank."""
    k = attrs.shape[1]
    binom = np.array(
        [[comb(c, q) for q in range(k + 1)] for c in range(domain.n_columns)], dtype=np.int64
    )
    attr_col = domain.attribute_columns()
    order, start, ok = clique_order(attrs, attr_col, binom, n_cliques)
    if not ok:  # not combinations (a repeated column): the general path
        return None
    groups = []
    for v in np.flatnonzero(np.diff(start)).tolist():
        s, e = int(start[v]), int(start[v + 1])
        groups.append((tuple(int(c) for c in attr_col[attrs[order[s]]]), order[s:e]))
    groups.sort(key=lambda g: g[0])  # clique (lexicographic) order, as encode_keys sorts
    return groups


def contains(
    haystack: NDArray[np.integer], needles: NDArray[np.integer], base: int
) -> NDArray[np.bool_]:
    """Which needle rows occur among the (lexicographically sorted) haystack rows."""
    if haystack.shape[0] == 0 or needles.shape[0] == 0:
        return np.zeros(needles.shape[0], dtype=bool)
    hay = encode_keys(haystack, base)
    keys = encode_keys(needles, base)
    pos = np.minimum(np.searchsorted(hay, keys), hay.shape[0] - 1)
    found: NDArray[np.bool_] = hay[pos] == keys
    return found


def candidates_from_survivors(survivors: CombinationCounts, domain: Domain) -> NDArray[np.int32]:
    """V_k: all k-tuples whose (k−1)-sub-tuples are all in ``survivors`` (S_{k−1}), sorted.

    Apriori join: two survivors sharing their first k−2 attributes and ending in attributes
    of different columns form a candidate; candidates are then kept only if every other
    (k−1)-subset survived too. Because every S_l is downward closed this equals the spec's
    "c + {a}, every sub-combination of lengths 2..k−1 present" (§1.5 step 1).
    """
    return join_candidates(survivors.attrs, domain)


def join_candidates(prev: NDArray[np.int32], domain: Domain) -> NDArray[np.int32]:
    """:func:`candidates_from_survivors` of the survivors' attributes only (sorted rows)."""
    k = prev.shape[1] + 1
    if HAVE_NUMBA:
        joined = join_plan(prev, domain)
        if joined is None:
            return np.zeros((0, k), dtype=np.int32)
        plan, keep, n_out = joined
        out: NDArray[np.int32] = join_fill(plan, keep, n_out)
        invariant(rows_ascending(out), "join output must be sorted and unique")
        return out
    parts = _join_parts(prev, domain)
    if parts is None:
        return np.zeros((0, k), dtype=np.int32)
    _, block_end, group_end, n_partners, base = parts
    out = _join_numpy(prev, block_end, group_end, n_partners, base)
    keys = encode_keys(out, base)
    invariant(bool((keys[1:] > keys[:-1]).all()), "join output must be sorted and unique")
    return out


def join_plan(
    prev: NDArray[np.int32], domain: Domain
) -> tuple[JoinPlan, NDArray[np.bool_], int] | None:
    """The join of :func:`join_candidates` before its output is built (numba only): the plan,
    which joined pairs are kept, and their number |V_k| (None: no candidate). ``join_fill``
    builds V_k from it; :func:`~sds_core.marginals._kernels.join_survivors` reads the
    survivors off it without V_k."""
    parts = _join_parts(prev, domain)
    if parts is None:
        return None
    pk, block_end, group_end, n_partners, base = parts
    offsets = np.concatenate(([0], np.cumsum(n_partners)))
    prev32 = np.ascontiguousarray(prev, dtype=np.int32)
    plan = JoinPlan(prev32, pk, block_end, group_end, offsets, base)
    keep = join_keep(plan)
    return plan, keep, int(keep.sum())


def _join_parts(
    prev: NDArray[np.int32], domain: Domain
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], int] | None:
    """The prefix keys, block and group ends, partners per row and key base of the join; None
    when no pair joins."""
    km1 = prev.shape[1]
    if prev.shape[0] < 2:
        return None
    base = max(domain.n_attributes, 2)
    attr_col = domain.attribute_columns()
    p = km1 - 1
    m = prev.shape[0]
    last_col = attr_col[prev[:, km1 - 1]].astype(np.int64)
    pk = encode_keys(prev[:, :p], base)  # all zero when p == 0
    group_change = np.concatenate(([False], pk[1:] != pk[:-1]))
    # rows sorted => inside a prefix group the last attributes ascend, so their columns form
    # contiguous blocks; row i pairs with every row after its column block, up to group end
    block_change = group_change | np.concatenate(([False], last_col[1:] != last_col[:-1]))
    idx = np.arange(m, dtype=np.int64)
    block_end = _segment_end(block_change, idx)
    group_end = _segment_end(group_change, idx)
    n_partners = group_end - block_end
    if int(n_partners.sum()) == 0:
        return None
    return pk, block_end, group_end, n_partners, base


def _join_numpy(
    prev: NDArray[np.int32],
    block_end: NDArray[np.int64],
    group_end: NDArray[np.int64],
    n_partners: NDArray[np.int64],
    base: int,
) -> NDArray[np.int32]:
    """The join of :func:`candidates_from_survivors` in numpy (fallback without numba)."""
    m, km1 = prev.shape
    k, p = km1 + 1, km1 - 1
    total = int(n_partners.sum())
    idx = np.arange(m, dtype=np.int64)
    ri = np.repeat(idx, n_partners)
    offs = np.cumsum(n_partners) - n_partners
    rj = np.repeat(block_end - offs, n_partners) + np.arange(total, dtype=np.int64)
    cand = np.empty((total, k), dtype=np.int32)
    cand[:, :km1] = prev[ri]
    cand[:, km1] = prev[rj, km1 - 1]
    keep = np.ones(total, dtype=bool)
    for drop in range(p):  # subsets dropping a prefix position; the two joined rows are present
        sub = np.delete(cand, drop, axis=1)
        keep &= contains(prev, sub, base)
    return np.ascontiguousarray(cand[keep])


def _segment_end(change: NDArray[np.bool_], idx: NDArray[np.int64]) -> NDArray[np.int64]:
    """For each position, the end (exclusive) of its segment; segments start where change."""
    starts = np.flatnonzero(change)
    ends = np.concatenate((starts, [idx.shape[0]]))
    seg = np.cumsum(change)
    return ends[seg]


@dataclass(frozen=True, eq=False)
class CliqueLookup:
    """Maps records to the candidates of one clique.

    Attributes:
        cols: the clique's column indices.
        mult: mixed-radix multipliers of the local key.
        rows: indices (into the candidate array V_k) of this clique's candidates, in local-key
            order; a record's *local index* i means candidate ``rows[i]``.
        keys: the sorted local keys of those candidates.
        table: dense local-key → local-index table (-1: not a candidate), or None.
    """

    cols: tuple[int, ...]
    mult: NDArray[np.int64]
    rows: NDArray[np.int64]
    keys: NDArray[np.int64]
    table: NDArray[np.int32] | None

    def lookup(self, shifted: NDArray[np.int64]) -> NDArray[np.int32]:
        """Local candidate index of each record's combination in this clique, -1 if none.

        Args:
            shifted: the partition's :func:`shifted_columns`.
        """
        key = local_keys(shifted, self.cols, self.mult)
        if self.table is not None:
            return self.table[key]
        if self.keys.shape[0] == 0:
            return np.full(key.shape[0], -1, dtype=np.int32)
        pos = np.searchsorted(self.keys, key)
        np.minimum(pos, self.keys.shape[0] - 1, out=pos)
        return np.where(self.keys[pos] == key, pos, -1).astype(np.int32)


def build_lookups(
    domain: Domain,
    candidates: NDArray[np.integer],
    *,
    n_records: int = 0,
    dense_budget: int = 1 << 26,
) -> list[CliqueLookup]:
    """One :class:`CliqueLookup` per clique that has candidates.

    Small cliques (and big ones when there are many records) get dense tables, one random
    access per record, until ``dense_budget`` entries are used; the rest use binary search.
    """
    sized = []
    for cols, rows in group_by_clique(domain, candidates):
        mult, size = clique_multipliers(domain, cols)
        sized.append((size, cols, rows, mult))
    dense_ok: set[tuple[int, ...]] = set()
    used = 0
    for size, cols, _, _ in sorted(sized, key=lambda t: t[0]):
        if use_dense(size, n_records, used, dense_budget):
            dense_ok.add(cols)
            used += size
    out = []
    for size, cols, rows, mult in sized:
        if HAVE_NUMBA:
            digit_offset = np.array([domain.offsets[c] - 1 for c in cols], dtype=np.int64)
            keys, ascending = row_local_keys(candidates, rows, digit_offset, mult)
        else:
            keys = attrs_to_local(domain, cols, candidates[rows])
            ascending = bool((keys[1:] >= keys[:-1]).all())
        if not ascending:  # sorted candidates give ascending keys (no sort needed)
            order = np.argsort(keys, kind="stable")
            keys, rows = keys[order], rows[order]
        table = None
        if cols in dense_ok:
            table = np.full(size, -1, dtype=np.int32)
            table[keys] = np.arange(keys.shape[0], dtype=np.int32)
        out.append(CliqueLookup(cols, mult, rows, keys, table))
    return out


def occurring_attributes(domain: Domain, codes: NDArray[np.int32]) -> NDArray[np.int32]:
    """V_1: the global ids of the attributes that occur in at least one record, as (m, 1)."""
    if HAVE_NUMBA:
        offsets = np.asarray(domain.offsets[:-1], dtype=np.int64)
        present = present_attributes(codes, offsets, domain.n_attributes)
        return np.flatnonzero(present).astype(np.int32).reshape(-1, 1)
    present = np.zeros(domain.n_attributes, dtype=bool)
    for c in range(domain.n_columns):
        col = codes[:, c]
        seen = np.bincount(col[col >= 0], minlength=domain.cardinalities[c]) > 0
        present[domain.offsets[c] : domain.offsets[c + 1]] = seen
    return np.flatnonzero(present).astype(np.int32).reshape(-1, 1)
