"""Compiled loops of record matching (used only by :mod:`sds_core.synthesis.matching`).

Counting the synthetic records' combinations onto the aggregates' combination indices, and one
pass of the local search that moves cells towards the DP counts without ever creating an
unreported combination. A cell's candidates are looked up in one call (:func:`gather`): the index
of every combination {a} + S, S a subset of the record's other attributes of size < R, read from
the synthesis :class:`~sds_core.synthesis.layout.Layout` (1-combinations by ``idx1``, pairs by the
dense pair table, triples by their bit's rank in their pair's CSR list, else the hash table).
Lookups are written out in the loops: numba reference-counts the array arguments of every helper
call, which would cost more than the lookups.
"""

from __future__ import annotations

from math import comb
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from sds_core._jit import _jit
from sds_core.synthesis._bitsets import popcount64
from sds_core.synthesis.layout import Layout

__all__ = ["MatchState", "Subsets", "count_synthetic", "match_pass", "subsets"]

UNREPORTED = -1
"""Index :func:`gather` gives a combination the aggregates do not report."""
HOLDS_A = -2
"""Index :func:`gather` gives a subset that contains the attribute itself (no combination)."""


class MatchState(NamedTuple):
    """The search's state, updated in place by :func:`match_pass`.

    Attributes:
        syn: synthetic count of every combination (by index in ``Layout.counts``).
        weight_by_len: objective weight of each combination length (index k; 0 unused).
        empty_count: empty cells per column.
        empty_target: the DP 1-counts' empty cells per column (records - sum of 1-counts, >= 0).
    """

    syn: NDArray[np.int64]
    weight_by_len: NDArray[np.float64]
    empty_count: NDArray[np.int64]
    empty_target: NDArray[np.float64]


class Subsets(NamedTuple):
    """Subsets of size < R of positions 0..C-2 (a record's other attributes), colex order.

    Ordered by their largest position, so the subsets of positions 0..m-1 are the first
    ``n_of_m[m]``. ``members[j, :size[j]]`` are subset j's positions, ascending.
    """

    members: NDArray[np.int64]
    size: NDArray[np.int64]
    n_of_m: NDArray[np.int64]


def subsets(n_others: int, reporting_length: int) -> Subsets:
    """The :class:`Subsets` of ``n_others`` positions with size <= reporting_length - 1.

    >>> s = subsets(3, 3)
    >>> [tuple(s.members[j, : s.size[j]].tolist()) for j in range(len(s.size))]
    [(), (0,), (1,), (0, 1), (2,), (0, 2), (1, 2)]
    >>> s.n_of_m.tolist()
    [1, 2, 4, 7]
    """
    kmax = max(reporting_length - 1, 0)
    rows: list[tuple[int, ...]] = [()]
    for top in range(n_others):  # subsets whose largest position is `top`
        for k in range(1, kmax + 1):
            rows.extend(_with_top(top, k))
    members = np.full((len(rows), max(kmax, 1)), -1, dtype=np.int64)
    for j, row in enumerate(rows):
        members[j, : len(row)] = row
    n_of_m = np.array(
        [sum(comb(m, k) for k in range(kmax + 1)) for m in range(n_others + 1)], dtype=np.int64
    )
    return Subsets(members, np.array([len(r) for r in rows], dtype=np.int64), n_of_m)


def _with_top(top: int, k: int) -> list[tuple[int, ...]]:
    """Subsets of size k of 0..top holding ``top``, lexicographic."""
    from itertools import combinations

    return [(*rest, top) for rest in combinations(range(top), k - 1)]


@_jit
def gather(
    lay: Layout,
    attrs: np.ndarray,
    n_a: int,
    others: np.ndarray,
    m: int,
    sets: Subsets,
    pair_buf: np.ndarray,
    key_buf: np.ndarray,
    out: np.ndarray,
) -> None:
    """``out[i, j]`` = index of the combination attrs[i] + others[members of subset j].

    :data:`UNREPORTED` when the aggregates do not report it, :data:`HOLDS_A` when the subset
    contains attrs[i] itself. ``others[:m]`` ascending; subsets j < ``sets.n_of_m[m]``.
    """
    R = lay.reporting_length
    idx1, pair_idx, attr_col, col_lo = lay.idx1, lay.pair_idx, lay.attr_col, lay.col_lo
    n_attr = attr_col.shape[0]
    tri, bs = lay.triples, lay.bitsets
    tstart, tthird, tcombo = tri.start, tri.third, tri.combo
    colw, b3, cum3 = bs.colw, bs.b3, bs.cum3
    W = colw[colw.shape[0] - 1]
    pair_first = lay.pair_first
    members, size = sets.members, sets.size
    ns = sets.n_of_m[m]
    fast = lay.dense_pairs and R <= 3
    csr = tstart.shape[0] > 1
    if fast:  # the pair index of every 2-subset of the others, once for all attributes
        for j in range(ns):
            if size[j] == 2:
                pair_buf[j] = pair_idx[others[members[j, 0]] * n_attr + others[members[j, 1]]]
    tkeys, tvals, tbits, base = lay.table.keys, lay.table.vals, lay.table.bits, lay.table.base
    for i in range(n_a):
        a = attrs[i]
        c = attr_col[a]
        la = a - col_lo[c]
        bit = np.uint64(1) << np.uint64(la % 64)
        below = bit - np.uint64(1)
        for j in range(ns):
            k = size[j]
            held = False
            for t in range(k):
                if others[members[j, t]] == a:
                    held = True
            if held:
                out[i, j] = HOLDS_A
                continue
            if k == 0:
                out[i, j] = idx1[a]
            elif fast and k == 1:
                out[i, j] = pair_idx[others[members[j, 0]] * n_attr + a]
            elif fast:  # k == 2: a triple, found in the CSR list of its pair
                p = pair_buf[j]
                if p < 0 or not csr:
                    out[i, j] = UNREPORTED
                elif bs.enabled:
                    o = (p - pair_first) * W + colw[c] + la // 64
                    word = b3[o]
                    if word & bit == 0:
                        out[i, j] = UNREPORTED
                    else:
                        e = tstart[p] + cum3[o] + np.int64(popcount64(word & below))  # type: ignore[call-arg]  # intrinsic
                        out[i, j] = tcombo[e]
                else:
                    lo = tstart[p]
                    hi = tstart[p + 1]
                    while lo < hi:
                        mid = (lo + hi) >> 1
                        if tthird[mid] < a:
                            lo = mid + 1
                        else:
                            hi = mid
                    if lo < tstart[p + 1] and tthird[lo] == a:
                        out[i, j] = tcombo[lo]
                    else:
                        out[i, j] = UNREPORTED
            else:  # the hash table: the key of the sorted combination (Horner over ids + 1)
                n_key = 0
                placed = False
                for t in range(k):
                    y = others[members[j, t]]
                    if not placed and a < y:
                        key_buf[n_key] = a
                        n_key += 1
                        placed = True
                    key_buf[n_key] = y
                    n_key += 1
                if not placed:
                    key_buf[n_key] = a
                    n_key += 1
                key = np.int64(0)
                for t in range(n_key):
                    key = key * base + key_buf[t] + 1
                mask = (1 << tbits) - 1
                h = np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)
                slot = np.int64(h >> np.uint64(64 - tbits))
                found = UNREPORTED
                while True:
                    kk = tkeys[slot]
                    if kk == key:
                        found = tvals[slot]
                        break
                    if kk == -1:
                        break
                    slot = (slot + 1) & mask
                out[i, j] = found


@_jit
def count_synthetic(ids: np.ndarray, lay: Layout, syn: np.ndarray, sets: Subsets) -> int:
    """Add every record's combinations of length 1..R to ``syn`` (by combination index).

    ``ids`` (n, C) holds attribute ids (-1 = empty); a record's ids are ascending left to right
    (the domain numbers attributes column by column). Each combination is counted once, from
    its last attribute. Returns the number of combinations the records hold that the aggregates
    do not report (0 for records of aggregate-seeded synthesis).
    """
    n, n_cols = ids.shape
    others = np.empty(n_cols, dtype=np.int64)
    attrs = np.empty(1, dtype=np.int64)
    out = np.empty((1, sets.size.shape[0]), dtype=np.int64)
    pair_buf = np.empty(sets.size.shape[0], dtype=np.int64)
    key_buf = np.empty(lay.reporting_length + 1, dtype=np.int64)
    missing = 0
    for r in range(n):
        m = 0
        for c in range(n_cols):
            a = ids[r, c]
            if a < 0:
                continue
            attrs[0] = a
            gather(lay, attrs, 1, others, m, sets, pair_buf, key_buf, out)
            for j in range(sets.n_of_m[m]):
                ci = out[0, j]
                if ci >= 0:
                    syn[ci] += 1
                else:
                    missing += 1
            others[m] = a
            m += 1
    return missing


@_jit
def match_pass(
    ids: np.ndarray,
    rows: np.ndarray,
    lay: Layout,
    st: MatchState,
    sets: Subsets,
    max_drops: int,
) -> int:
    """One pass of the local search over the cells of ``rows`` (in that order); returns moves.

    For each cell (record r, column c, value u), each other value v of the column with a
    reported 1-combination, and "empty", is a candidate; v may enter only if every combination
    it forms with fewer than R of the record's other attributes is reported. A v with fewer
    synthetic records than its DP count may also enter by emptying up to ``max_drops`` other
    cells it forms unreported combinations with (of a blocking subset, the value with the
    largest 1-way surplus goes). The cell takes the candidate that lowers
    ``sum_k weight_by_len[k] * sum_c (syn[c] - count[c]) ** 2 + weight_by_len[1] *
    sum_columns (empty_count - empty_target) ** 2`` the most, if one does. No move creates an
    unreported combination. ``ids`` and ``st`` change in place.
    """
    n_cols = ids.shape[1]
    counts, idx1, attr_col = lay.counts, lay.idx1, lay.attr_col
    syn, wl, empty_count, empty_target = st.syn, st.weight_by_len, st.empty_count, st.empty_target
    members, size = sets.members, sets.size
    max_card = 1
    for c in range(n_cols):
        max_card = max(max_card, lay.col_hi[c] - lay.col_lo[c])
    n_sets = size.shape[0]
    G = np.empty((max_card + 1, n_sets), dtype=np.int64)
    G2 = np.empty((max(max_drops, 1), n_sets), dtype=np.int64)
    attrs = np.empty(max_card + 1, dtype=np.int64)
    attrs2 = np.empty(max(max_drops, 1), dtype=np.int64)
    others = np.empty(n_cols, dtype=np.int64)
    pair_buf = np.empty(n_sets, dtype=np.int64)
    key_buf = np.empty(lay.reporting_length + 1, dtype=np.int64)
    drop = np.empty(max(max_drops, 1), dtype=np.int64)  # positions in others
    best_drop = np.empty(max(max_drops, 1), dtype=np.int64)
    hit = np.zeros(n_sets, dtype=np.bool_)
    w1 = wl[1]
    moves = 0
    for q in range(rows.shape[0]):
        r = rows[q]
        for c in range(n_cols):
            u = ids[r, c]
            m = 0
            for c2 in range(n_cols):
                if c2 != c and ids[r, c2] >= 0:
                    others[m] = ids[r, c2]
                    m += 1
            ns = sets.n_of_m[m]
            n_a = 0
            if u >= 0:
                attrs[0] = u
                n_a = 1
            first = n_a
            for v in range(lay.col_lo[c], lay.col_hi[c]):
                if v != u and idx1[v] >= 0:
                    attrs[n_a] = v
                    n_a += 1
            gather(lay, attrs, n_a, others, m, sets, pair_buf, key_buf, G)
            e_empty = float(empty_count[c] - empty_target[c])
            # the objective's change when u leaves the cell
            d_rm = 0.0
            if u >= 0:
                ok = True
                for j in range(ns):
                    ci = G[0, j]
                    if ci < 0:
                        ok = False  # the record holds an unreported combination: leave it
                        break
                    d_rm += wl[size[j] + 1] * (1.0 - 2.0 * float(syn[ci] - counts[ci]))
                if not ok:
                    continue
                best = d_rm + w1 * (1.0 + 2.0 * e_empty)  # u -> empty
            else:
                d_rm = w1 * (1.0 - 2.0 * e_empty)
                best = 0.0
            best_i = -1  # -1: empty (or no move, when u is empty)
            n_best_drop = 0
            for i in range(first, n_a):
                v = attrs[i]
                deficit = syn[idx1[v]] < counts[idx1[v]]
                # blocking subsets, pairs first: drop one member of each (largest surplus)
                n_drop = 0
                ok = True
                for k in range(1, lay.reporting_length):
                    for j in range(ns):
                        if size[j] != k or G[i, j] != UNREPORTED:
                            continue
                        covered = False
                        for t in range(k):
                            for s in range(n_drop):
                                if members[j, t] == drop[s]:
                                    covered = True
                        if covered:
                            continue
                        if not deficit or n_drop == max_drops:
                            ok = False
                            break
                        pos = members[j, 0]
                        worst = -1.0e300
                        for t in range(k):
                            x = others[members[j, t]]
                            sur = float(syn[idx1[x]] - counts[idx1[x]])
                            if sur >= worst:
                                worst = sur
                                pos = members[j, t]
                        drop[n_drop] = pos
                        n_drop += 1
                    if not ok:
                        break
                if not ok:
                    continue
                for j in range(ns):
                    h = False
                    for t in range(size[j]):
                        for s in range(n_drop):
                            if members[j, t] == drop[s]:
                                h = True
                    hit[j] = h
                d = d_rm
                for j in range(ns):
                    if not hit[j]:
                        ci = G[i, j]
                        d += wl[size[j] + 1] * (1.0 + 2.0 * float(syn[ci] - counts[ci]))
                if n_drop > 0:
                    for s in range(n_drop):
                        attrs2[s] = others[drop[s]]
                    gather(lay, attrs2, n_drop, others, m, sets, pair_buf, key_buf, G2)
                    for s in range(n_drop):
                        for j in range(ns):
                            ci = G2[s, j]
                            if ci == HOLDS_A or _holds_earlier(members, size, j, drop, s):
                                continue
                            d += wl[size[j] + 1] * (1.0 - 2.0 * float(syn[ci] - counts[ci]))
                        xc = attr_col[attrs2[s]]
                        d += w1 * (1.0 + 2.0 * float(empty_count[xc] - empty_target[xc]))
                if d < best - 1e-9:
                    best = d
                    best_i = i
                    n_best_drop = n_drop
                    for s in range(n_drop):
                        best_drop[s] = drop[s]
            if best >= -1e-9 or (u < 0 and best_i < 0):
                continue
            # apply: u's combinations lose a record, then the drops', then the new value's gain
            if u >= 0:
                for j in range(ns):
                    syn[G[0, j]] -= 1
                empty_count[c] += 1
            if n_best_drop > 0:
                for s in range(n_best_drop):
                    attrs2[s] = others[best_drop[s]]
                gather(lay, attrs2, n_best_drop, others, m, sets, pair_buf, key_buf, G2)
                for s in range(n_best_drop):
                    for j in range(ns):
                        ci = G2[s, j]
                        if ci == HOLDS_A or _holds_earlier(members, size, j, best_drop, s):
                            continue
                        syn[ci] -= 1
                    xc = attr_col[attrs2[s]]
                    empty_count[xc] += 1
                    ids[r, xc] = -1
            if best_i >= 0:
                for j in range(ns):
                    h = False
                    for t in range(size[j]):
                        for s in range(n_best_drop):
                            if members[j, t] == best_drop[s]:
                                h = True
                    if not h:
                        syn[G[best_i, j]] += 1
                empty_count[c] -= 1
                ids[r, c] = attrs[best_i]
            else:
                ids[r, c] = -1
            moves += 1
    return moves


@_jit
def _holds_earlier(members: np.ndarray, size: np.ndarray, j: int, drop: np.ndarray, s: int) -> bool:
    """Subset j holds one of the positions drop[:s] (counted with that earlier drop)."""
    for t in range(size[j]):
        for s2 in range(s):
            if members[j, t] == drop[s2]:
                return True
    return False
