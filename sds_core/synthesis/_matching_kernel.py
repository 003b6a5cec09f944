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

from sds_core._jit import _inline, _jit
from sds_core.synthesis._bitsets import popcount64
from sds_core.synthesis.layout import Layout

__all__ = ["MatchState", "Subsets", "count_synthetic", "match_pass", "subsets"]

UNREPORTED = -1
"""Index :func:`gather` gives a combination the aggregates do not report."""
HOLDS_A = -2
"""Index :func:`gather` gives a subset that contains the attribute itself (no combination)."""
SKIPPED = -3
"""Index :func:`gather` gives a subset it was asked not to look up (a length of weight 0)."""


class MatchState(NamedTuple):
    """The search's state, updated in place by :func:`match_pass`.

    Attributes:
        syn: synthetic count of every combination (by index in ``Layout.counts``).
        weight_by_len: objective weight of each combination length (index k); index 0: the
            weight of the columns' empty cells.
        empty_count: empty cells per column.
        empty_target: the DP 1-counts' empty cells per column (records - sum of 1-counts, >= 0).
        tolerance_by_len: gap to the DP count that costs nothing, per length (index k; the
            empty cells use length 1's): a combination's term is max(|gap| - tolerance, 0) ** 2.
        scale: the records' count of a combination is compared with ``scale`` times its DP
            count (records / records per budget cycle: 1 when the target is the DP count).
    """

    syn: NDArray[np.int64]
    weight_by_len: NDArray[np.float64]
    empty_count: NDArray[np.int64]
    empty_target: NDArray[np.float64]
    tolerance_by_len: NDArray[np.float64]
    scale: float


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


@_inline
def _gain(e: float, step: float, tol: float) -> float:
    """Change of max(|e| - tol, 0) ** 2 when the gap e moves by ``step``."""
    a = abs(e + step) - tol
    b = abs(e) - tol
    return (a * a if a > 0 else 0.0) - (b * b if b > 0 else 0.0)


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
    max_size: int,
) -> None:
    """``out[i, j]`` = index of the combination attrs[i] + others[members of subset j].

    :data:`UNREPORTED` when the aggregates do not report it, :data:`HOLDS_A` when the subset
    contains attrs[i] itself, :data:`SKIPPED` when the subset has more than ``max_size``
    members (not looked up). ``others[:m]`` ascending; subsets j < ``sets.n_of_m[m]``.
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
            if k > max_size:
                out[i, j] = SKIPPED
                continue
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
def count_synthetic(
    ids: np.ndarray, lay: Layout, syn: np.ndarray, sets: Subsets, max_size: int
) -> int:
    """Add every record's combinations of length 1..R to ``syn`` (by combination index).

    ``ids`` (n, C) holds attribute ids (-1 = empty); a record's ids are ascending left to right
    (the domain numbers attributes column by column). Each combination is counted once, from
    its last attribute. Returns the number of combinations the records hold that the aggregates
    do not report (0 for records of aggregate-seeded synthesis). Combinations longer than
    ``max_size + 1`` are neither counted nor checked.
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
            gather(lay, attrs, 1, others, m, sets, pair_buf, key_buf, out, max_size)
            for j in range(sets.n_of_m[m]):
                ci = out[0, j]
                if ci >= 0:
                    syn[ci] += 1
                elif ci == UNREPORTED:
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
    kicks: bool,
    stats: np.ndarray,
) -> int:
    """One pass of the local search over the cells of ``rows`` (in that order); returns moves.

    For each cell (record r, column c, value u), each other value v of the column with a
    reported 1-combination, and "empty", is a candidate; v may enter only if every combination
    it forms with fewer than R of the record's other attributes is reported. With ``kicks``, a
    v further below its DP 1-count than u may also enter by emptying one other cell x, when
    every combination v forms with the rest (without x) is reported. The cell takes the
    candidate that lowers ``sum_k weight_by_len[k] * sum_c g(syn[c] - count[c]) +
    weight_by_len[0] * sum_columns g(empty_count - empty_target)`` the most, if one does, where
    g(e) = max(|e| - tolerance_by_len[k], 0) ** 2. No move creates an unreported combination.
    ``ids`` and ``st`` change in place; ``stats`` (int64, 4) adds the candidates looked up, the
    kicks evaluated, the kicks made and the moves.
    """
    n_cols = ids.shape[1]
    counts, idx1, attr_col = lay.counts, lay.idx1, lay.attr_col
    syn, wl, empty_count, empty_target = st.syn, st.weight_by_len, st.empty_count, st.empty_target
    tol = st.tolerance_by_len
    scale = st.scale
    members, size = sets.members, sets.size
    max_card = 1
    for c in range(n_cols):
        max_card = max(max_card, lay.col_hi[c] - lay.col_lo[c])
    n_sets = size.shape[0]
    G = np.empty((max_card + 1, n_sets), dtype=np.int64)
    G2 = np.empty((1, n_sets), dtype=np.int64)
    attrs = np.empty(max_card + 1, dtype=np.int64)
    attrs2 = np.empty(1, dtype=np.int64)
    others = np.empty(n_cols, dtype=np.int64)
    pair_buf = np.empty(n_sets, dtype=np.int64)
    key_buf = np.empty(lay.reporting_length + 1, dtype=np.int64)
    drop_cost = np.empty(n_cols, dtype=np.float64)  # per position of others, NaN: not computed
    w_empty = wl[0]
    bs = lay.bitsets
    colw, has1, b2, b3 = bs.colw, bs.has1, bs.b2, bs.b3
    W = colw[colw.shape[0] - 1]
    pair_idx, pair_first = lay.pair_idx, lay.pair_first
    n_attr = attr_col.shape[0]
    prefilter = bs.enabled and lay.reporting_length <= 3
    has_b3 = lay.reporting_length == 3 and lay.triples.start.shape[0] > 1
    acc = np.empty(max(W, 1), dtype=np.uint64)  # valid as they are
    kick_acc = np.empty(max(W, 1), dtype=np.uint64)  # valid once one other cell empties
    max_w = 1
    for c in range(n_cols):
        max_w = max(max_w, colw[c + 1] - colw[c])
    vad = np.zeros((n_cols, max_w), dtype=np.uint64)  # valid once others[t] empties
    # lengths of weight 0 need no lookup when the bits prove validity
    look = lay.reporting_length - 1
    if prefilter:
        while look > 1 and wl[look + 1] == 0.0:
            look -= 1
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
            lo = lay.col_lo[c]
            e_u = float(syn[idx1[u]]) - counts[idx1[u]] * scale if u >= 0 else 0.0
            kick_below = min(e_u, 0.0)  # a kick only for a value further below its DP count
            if prefilter:
                # the values every other attribute pairs with (and, R = 3, every pair of them
                # has as a third): valid as they are; and those valid once others[t] empties
                w0 = colw[c]
                nw = colw[c + 1] - w0
                for w in range(nw):
                    acc[w] = has1[w0 + w]
                    kick_acc[w] = 0
                for t in range(m):
                    o = others[t] * W + w0
                    for w in range(nw):
                        acc[w] &= b2[o + w]
                if has_b3:
                    for t in range(m):
                        for t2 in range(t + 1, m):
                            o = (pair_idx[others[t] * n_attr + others[t2]] - pair_first) * W + w0
                            for w in range(nw):
                                acc[w] &= b3[o + w]
                if kicks:
                    for x in range(m):
                        for w in range(nw):
                            vad[x, w] = has1[w0 + w]
                        for t in range(m):
                            if t != x:
                                o = others[t] * W + w0
                                for w in range(nw):
                                    vad[x, w] &= b2[o + w]
                        if has_b3:
                            for t in range(m):
                                for t2 in range(t + 1, m):
                                    if t == x or t2 == x:
                                        continue
                                    o = (
                                        pair_idx[others[t] * n_attr + others[t2]] - pair_first
                                    ) * W + w0
                                    for w in range(nw):
                                        vad[x, w] &= b3[o + w]
                        for w in range(nw):
                            kick_acc[w] |= vad[x, w]
            for v in range(lo, lay.col_hi[c]):
                if v == u or idx1[v] < 0:
                    continue
                if prefilter:
                    sh = np.uint64((v - lo) % 64)
                    if (acc[(v - lo) // 64] >> sh) & np.uint64(1) == 0:
                        if not kicks or float(syn[idx1[v]]) - counts[idx1[v]] * scale >= kick_below:
                            continue
                        if (kick_acc[(v - lo) // 64] >> sh) & np.uint64(1) == 0:
                            continue
                attrs[n_a] = v
                n_a += 1
            gather(lay, attrs, n_a, others, m, sets, pair_buf, key_buf, G, look)
            stats[0] += n_a
            e_empty = float(empty_count[c] - empty_target[c])
            # the objective's change when u leaves the cell
            d_rm = 0.0
            if u >= 0:
                ok = True
                for j in range(ns):
                    ci = G[0, j]
                    if ci == SKIPPED:
                        continue
                    if ci < 0:
                        ok = False  # the record holds an unreported combination: leave it
                        break
                    d_rm += wl[size[j] + 1] * _gain(
                        float(syn[ci]) - counts[ci] * scale, -1.0, tol[size[j] + 1]
                    )
                if not ok:
                    continue
                best = d_rm + w_empty * _gain(e_empty, 1.0, tol[1])  # u -> empty
            else:
                d_rm = w_empty * _gain(e_empty, -1.0, tol[1])
                best = 0.0
            best_i = -1  # -1: empty (or no move, when u is empty)
            best_x = -1  # position in others of the cell a kick empties
            for t in range(m):
                drop_cost[t] = np.nan
            for i in range(first, n_a):
                v = attrs[i]
                # the cells whose emptying lets v in (x0, x1: positions in others; at most
                # two, the members of any one blocking subset); n_miss: v is blocked
                x0 = -1
                x1 = -1
                n_miss = 0
                if prefilter:
                    sh = np.uint64((v - lo) % 64)
                    vw = (v - lo) // 64
                    if (acc[vw] >> sh) & np.uint64(1) == 0:
                        n_miss = 1
                        for t in range(m if kicks else 0):
                            if (vad[t, vw] >> sh) & np.uint64(1) != 0:
                                if x0 < 0:
                                    x0 = t
                                else:
                                    x1 = t
                else:
                    for j in range(ns):
                        if G[i, j] != UNREPORTED:
                            continue
                        if n_miss == 0:
                            x0 = members[j, 0] if size[j] > 0 else -1
                            x1 = members[j, 1] if size[j] > 1 else -1
                        else:  # keep the members of the first blocking subset this one holds
                            has0 = False
                            has1_ = False
                            for t in range(size[j]):
                                if members[j, t] == x0:
                                    has0 = True
                                if members[j, t] == x1:
                                    has1_ = True
                            if not has0:
                                x0 = -1
                            if not has1_:
                                x1 = -1
                        n_miss += 1
                        if x0 < 0 and x1 < 0:
                            break
                if n_miss > 0 and (
                    not kicks
                    or (x0 < 0 and x1 < 0)
                    or float(syn[idx1[v]]) - counts[idx1[v]] * scale >= kick_below
                ):
                    continue
                for option in range(2 if n_miss > 0 else 1):
                    x = -1
                    if n_miss > 0:
                        x = x0 if option == 0 else x1
                        if x < 0:
                            continue
                    d = d_rm
                    for j in range(ns):
                        held = False
                        for t in range(size[j] if x >= 0 else 0):
                            if members[j, t] == x:
                                held = True
                        ci = G[i, j]
                        if not held and ci != SKIPPED:
                            d += wl[size[j] + 1] * _gain(
                                float(syn[ci]) - counts[ci] * scale, 1.0, tol[size[j] + 1]
                            )
                    if x >= 0:
                        stats[1] += 1
                        if np.isnan(drop_cost[x]):  # others[x] leaves (u already left)
                            attrs2[0] = others[x]
                            gather(lay, attrs2, 1, others, m, sets, pair_buf, key_buf, G2, look)
                            dc = 0.0
                            for j in range(ns):
                                ci = G2[0, j]
                                if ci >= 0:
                                    dc += wl[size[j] + 1] * _gain(
                                        float(syn[ci]) - counts[ci] * scale, -1.0, tol[size[j] + 1]
                                    )
                            xc = attr_col[others[x]]
                            ex = float(empty_count[xc] - empty_target[xc])
                            drop_cost[x] = dc + w_empty * _gain(ex, 1.0, tol[1])
                        d += drop_cost[x]
                    if d < best - 1e-9:
                        best = d
                        best_i = i
                        best_x = x
            if best >= -1e-9 or (u < 0 and best_i < 0):
                continue
            # apply: u's combinations lose a record, then the emptied cell's, then v's gain one
            if u >= 0:
                for j in range(ns):
                    if G[0, j] >= 0:
                        syn[G[0, j]] -= 1
                empty_count[c] += 1
            if best_x >= 0:
                stats[2] += 1
                attrs2[0] = others[best_x]
                gather(lay, attrs2, 1, others, m, sets, pair_buf, key_buf, G2, look)
                for j in range(ns):
                    if G2[0, j] >= 0:
                        syn[G2[0, j]] -= 1
                xc = attr_col[others[best_x]]
                empty_count[xc] += 1
                ids[r, xc] = -1
            if best_i >= 0:
                for j in range(ns):
                    held = False
                    for t in range(size[j] if best_x >= 0 else 0):
                        if members[j, t] == best_x:
                            held = True
                    if not held and G[best_i, j] >= 0:
                        syn[G[best_i, j]] += 1
                empty_count[c] -= 1
                ids[r, c] = attrs[best_i]
            else:
                ids[r, c] = -1
            moves += 1
    stats[3] += moves
    return moves
