"""Compiled kernel of the default synthesis mode (``complete_records=True``), column by column.

Used only by :mod:`sds_core.synthesis.generator`. In completion mode each step keeps only the
candidates of the best-ranked free column, so this kernel evaluates columns lazily in rank order and
stops at the first one with a positive candidate weight, instead of keeping every free attribute's
sub-combinations up to date after each pick (:mod:`sds_core.synthesis._reference_kernel`, which
stays the kernel of the reference mode). Same candidates, weights and sampling distribution.
"""

from __future__ import annotations

import numpy as np

from sds_core._jit import _jit
from sds_core.synthesis._bitsets import available_bits, ctz64, popcount64
from sds_core.synthesis._lookups import (
    CandidateSubs,
    _combo_key_i,
    _lookup_i,
    push_sub,
    quantile_r8,
)
from sds_core.synthesis._records import (
    insert_attribute,
    new_budget_cycle,
    next_subset,
    weighted_index,
    write_record,
)
from sds_core.synthesis._state import (
    BUDGET_LEFT,
    RECORDS_MADE,
    STALLED,
    STATUS,
    RunSettings,
    WorkState,
)
from sds_core.synthesis.layout import Layout

__all__ = ["quantile_r8", "synthesize_records_ordered"]


@_jit
def synthesize_records_ordered(
    out: np.ndarray, uniforms: np.ndarray, lay: Layout, run: RunSettings, work: WorkState
) -> tuple[int, int]:
    """Completion-mode twin of :func:`sds_core.synthesis._reference_kernel.synthesize_records`.

    Same arguments and state contract; it also reads the column ranking of the settings
    (``run.col_order``, ``run.fill_rate``) and counts ``work.filled``. At each step the free
    columns are evaluated in rank order (attempt 0: budgets and synthetic counts; attempt 1,
    completion: raw weights, columns below their fill rate) and the first with a positive total
    weight is sampled from; columns that cannot become valid again in this record are skipped.
    With ``lay.bitsets.enabled`` a column's candidates are one AND of bit rows (see
    :mod:`sds_core.synthesis._bitsets`); otherwise the CSR lists are walked from the shortest
    (``lay.triples.col_start``). Both give the same records.

    Returns:
        (records written, uniforms consumed).
    """
    # local names for the arrays the loops read most
    attr_col, counts, idx1, syn, avail = lay.attr_col, lay.counts, lay.idx1, work.syn, work.avail
    tri, bs, pair_idx = lay.triples, lay.bitsets, lay.pair_idx
    n_attr = attr_col.shape[0]
    n_cols: int = out.shape[1]
    R = lay.reporting_length
    use_syn = run.use_synthetic_counts
    use_bits = bs.enabled
    has_csr = tri.start.shape[0] > 1 and R >= 3
    max_card = 1
    for c in range(n_cols):
        max_card = max(max_card, lay.col_hi[c] - lay.col_lo[c])
    cand = np.empty(max_card, dtype=np.int64)
    alive = np.empty(max_card, dtype=np.int64)
    cs = CandidateSubs(
        subs=np.empty((max_card, run.sub_cap), dtype=np.int64),
        wraw=np.empty((max_card, run.sub_cap), dtype=np.int64),
        wadj=np.empty((max_card, run.sub_cap), dtype=np.int64),
        nsub=np.zeros(max_card, dtype=np.int64),
        full=np.zeros(max_card, dtype=np.int64),
    )
    pick_slot = np.empty(max_card, dtype=np.int64)
    wts = np.empty(max_card, dtype=np.int64)
    tmp = np.empty(run.sub_cap + 2, dtype=np.int64)
    rec = np.empty(n_cols, dtype=np.int64)
    rb0 = np.empty(max(1, n_cols * (n_cols - 1) // 2), dtype=np.int64)  # CSR ranges per pair
    rb1 = np.empty_like(rb0)
    col_used = np.zeros(n_cols, dtype=np.bool_)
    dead = np.zeros((2, n_cols), dtype=np.bool_)
    sub = np.empty(max(R, 1), dtype=np.int64)
    sidx = np.empty(max(R, 1), dtype=np.int64)
    W: int = bs.colw[n_cols]
    bacc = np.empty(max(1, W), dtype=np.uint64)
    availbits = np.zeros(max(1, W), dtype=np.uint64)
    rp = np.empty(max(1, n_cols * (n_cols - 1) // 2), dtype=np.int64)  # record pairs (bitsets)
    n_rp = 0
    if use_bits:
        available_bits(availbits, avail, lay)
    n_written = 0
    u_used = 0
    n_out = out.shape[0]
    while n_written < n_out:
        if work.counters[BUDGET_LEFT] <= 0:
            if not new_budget_cycle(work, lay.budget, run.reset_budgets):
                break
            if use_bits:
                available_bits(availbits, avail, lay)
        if u_used + n_cols > uniforms.shape[0]:
            break
        s = 0
        col_used[:] = False
        n_rp = 0
        dead[:, :] = False
        while s < n_cols:
            m = 0
            total = np.int64(0)
            for attempt in range(2):
                if attempt == 1 and s == 0:
                    break
                for oi in range(n_cols):
                    c = run.col_order[oi]
                    if col_used[c] or dead[attempt, c]:
                        continue
                    if attempt == 1 and work.filled[c] >= run.fill_rate[c] * (
                        work.counters[RECORDS_MADE] + 1
                    ):
                        continue  # completion fills a column only below its fill rate
                    # ---- candidates of column c (inlined: a call, or a helper taking arrays,
                    # reference-counts every array argument with atomic instructions)
                    lo, hi = lay.col_lo[c], lay.col_hi[c]
                    adjusted = use_syn and attempt == 0
                    if use_bits:
                        # the candidates are one AND of bit rows: budget (or 1-count), pair
                        # partners of each record attribute, thirds of each record pair
                        w0 = bs.colw[c]
                        nw = bs.colw[c + 1] - w0
                        for w in range(nw):
                            bacc[w] = availbits[w0 + w] if attempt == 0 else bs.has1[w0 + w]
                        for t in range(s):
                            o = rec[t] * W + w0
                            for w in range(nw):
                                bacc[w] &= bs.b2[o + w]
                        if has_csr:
                            for pp in range(n_rp):
                                o = rp[pp] * W + w0
                                anyb = np.uint64(0)
                                for w in range(nw):
                                    bacc[w] &= bs.b3[o + w]
                                    anyb |= bacc[w]
                                if anyb == 0:
                                    break
                        n_alive = 0
                        for w in range(nw):
                            x = bacc[w]
                            while x != 0:
                                low = x & (~x + np.uint64(1))
                                a = lo + w * 64 + np.int64(ctz64(x))  # type: ignore[call-arg]  # intrinsic
                                x ^= low
                                i1 = idx1[a]
                                cand[n_alive] = a
                                cs.nsub[n_alive] = 0
                                cs.full[n_alive] = 0
                                u1 = syn[i1] if use_syn else 0
                                push_sub(cs, n_alive, i1, counts[i1], u1, False)
                                for t in range(s):
                                    pi = pair_idx[rec[t] * n_attr + a]
                                    u2 = syn[pi] if use_syn else 0
                                    push_sub(cs, n_alive, pi, counts[pi], u2, s == 1)
                                if has_csr:
                                    below = low - np.uint64(1)
                                    for pp in range(n_rp):
                                        o = rp[pp] * W + w0 + w
                                        e = (
                                            tri.start[rp[pp] + lay.pair_first]
                                            + bs.cum3[o]
                                            + np.int64(popcount64(bs.b3[o] & below))
                                        )
                                        u3 = work.triple_syn[e] if use_syn else 0
                                        push_sub(
                                            cs, n_alive, tri.combo[e], tri.count[e], u3, s == 2
                                        )
                                alive[n_alive] = n_alive
                                n_alive += 1
                    else:
                        # with R >= 3, a candidate must be a third attribute of every pair of the
                        # record: seed the candidates from the shortest such list (within lo..hi)
                        seed = -1
                        n_pairs = 0
                        if has_csr and s >= 2:
                            best = hi - lo + 1
                            for t in range(s):
                                for t2 in range(t + 1, s):
                                    pi = pair_idx[rec[t] * n_attr + rec[t2]]
                                    b0 = np.int64(0)
                                    b1 = np.int64(0)
                                    if pi >= 0:  # column c's slice of pair pi's list
                                        o = (pi - lay.pair_first) * n_cols + c
                                        b0 = tri.col_start[o]
                                        b1 = tri.col_start[o + 1]
                                    rb0[n_pairs] = b0
                                    rb1[n_pairs] = b1
                                    if b1 - b0 < best:
                                        best = b1 - b0
                                        seed = n_pairs
                                    n_pairs += 1
                        n_alive = 0
                        n_from = rb0[seed] if seed >= 0 else lo
                        n_to = rb1[seed] if seed >= 0 else hi
                        for e in range(n_from, n_to):
                            a = tri.third[e] if seed >= 0 else e
                            i1 = idx1[a]
                            if i1 < 0 or (attempt == 0 and avail[a] <= 0):
                                continue
                            cand[n_alive] = a
                            cs.nsub[n_alive] = 0
                            cs.full[n_alive] = 0
                            u1 = syn[i1] if use_syn else 0
                            push_sub(cs, n_alive, i1, counts[i1], u1, False)
                            if seed >= 0:  # the seed pair's triple
                                u3 = work.triple_syn[e] if use_syn else 0
                                push_sub(cs, n_alive, tri.combo[e], tri.count[e], u3, s == 2)
                            alive[n_alive] = n_alive
                            n_alive += 1
                        # pairs {a, r}, r in the record: one row of the dense pair table per r
                        if R >= 2:
                            for t in range(s):
                                if n_alive == 0:
                                    break
                                r = rec[t]
                                k = 0
                                for i in range(n_alive):
                                    j = alive[i]
                                    a = cand[j]
                                    if lay.dense_pairs:
                                        pi = pair_idx[r * n_attr + a]
                                    else:
                                        key = (
                                            np.int64(min(r, a) + 1) * lay.table.base + max(r, a) + 1
                                        )
                                        pi = _lookup_i(lay.table, key)
                                    if pi >= 0:
                                        u2 = syn[pi] if use_syn else 0
                                        push_sub(cs, j, pi, counts[pi], u2, s == 1)
                                        alive[k] = j
                                        k += 1
                                n_alive = k
                        # triples {a, r, r'}: pair {r, r'}'s third attributes in lo..hi (sorted CSR;
                        # CSR lists exist only with the dense pair table)
                        if seed >= 0:
                            for pp in range(n_pairs):
                                if n_alive == 0:
                                    break
                                if pp != seed:
                                    b0 = rb0[pp]
                                    b1 = rb1[pp]
                                    walk = b1 - b0 <= 8 * n_alive  # else binary searches
                                    k = 0
                                    e = b0
                                    for i in range(n_alive):
                                        j = alive[i]
                                        a = cand[j]
                                        if walk:
                                            while e < b1 and tri.third[e] < a:
                                                e += 1
                                        else:
                                            e2 = b1
                                            while e < e2:
                                                mid = (e + e2) >> 1
                                                if tri.third[mid] < a:
                                                    e = mid + 1
                                                else:
                                                    e2 = mid
                                        if e < b1 and tri.third[e] == a:
                                            u3 = work.triple_syn[e] if use_syn else 0
                                            push_sub(cs, j, tri.combo[e], tri.count[e], u3, s == 2)
                                            alive[k] = j
                                            k += 1
                                    n_alive = k
                    # the rest through the hash table: |S| = 2 without CSR lists, |S| >= 3
                    for k in range(3 if has_csr else 2, min(R - 1, s) + 1):
                        n_keep = 0
                        for i in range(n_alive):
                            j = alive[i]
                            a = cand[j]
                            ok = True
                            for t in range(k):
                                sidx[t] = t
                            while True:
                                for t in range(k):
                                    sub[t] = rec[sidx[t]]
                                key = _combo_key_i(sub, k, a, -1, lay.table.base)
                                ci = _lookup_i(lay.table, key)
                                if ci < 0:
                                    ok = False
                                    break
                                uk = syn[ci] if use_syn else 0
                                push_sub(cs, j, ci, counts[ci], uk, k == s)
                                if not next_subset(sidx, k, s):
                                    break
                            if ok:
                                alive[n_keep] = j
                                n_keep += 1
                        n_alive = n_keep
                    # weights: the full combination while |r + {a}| <= R, else the percentile
                    m = 0
                    total = np.int64(0)
                    for i in range(n_alive):
                        j = alive[i]
                        if s + 1 <= R:
                            wt = cs.wadj[j, cs.full[j]] if adjusted else cs.wraw[j, cs.full[j]]
                        else:
                            ns = cs.nsub[j]
                            if adjusted:
                                mn = cs.wadj[j, 0]
                                for t in range(1, ns):
                                    mn = min(mn, cs.wadj[j, t])
                                if mn <= 0:
                                    continue  # an exhausted sub-combination
                                qv = quantile_r8(cs.wadj, j, ns, run.percentile, tmp)
                            else:
                                qv = quantile_r8(cs.wraw, j, ns, run.percentile, tmp)
                            wt = np.int64(np.floor(qv + 0.5))  # weights > 0: half away from 0
                        if wt > 0:
                            pick_slot[m] = j
                            wts[m] = wt
                            total += wt
                            m += 1
                    if total > 0:
                        break
                    # invalid / out-of-budget candidates stay so for the record; a zero
                    # A - syn weight of the full combination (|r + {a}| <= R) may not
                    if attempt == 1 or s >= R or not use_syn:
                        dead[attempt, c] = True
                if total > 0:
                    break
            if total <= 0:
                break
            j = pick_slot[weighted_index(wts, m, total, uniforms[u_used])]
            u_used += 1
            x = cand[j]
            if avail[x] > 0:
                avail[x] -= 1
                work.counters[BUDGET_LEFT] -= 1
            if use_syn:
                for t in range(cs.nsub[j]):
                    ci = cs.subs[j, t]
                    if has_csr and tri.first <= ci < tri.first + tri.pos.shape[0]:
                        for q in range(3):  # triples are read only from the CSR lists
                            pos = tri.pos[ci - tri.first, q]
                            if pos >= 0:
                                work.triple_syn[pos] += 1
                    else:
                        syn[ci] += 1
            if use_bits and has_csr:
                for t in range(s):
                    rp[n_rp] = pair_idx[rec[t] * n_attr + x] - lay.pair_first
                    n_rp += 1
            if use_bits and avail[x] == 0:
                lx = x - lay.col_lo[attr_col[x]]
                word = bs.colw[attr_col[x]] + lx // 64
                availbits[word] &= ~(np.uint64(1) << np.uint64(lx % 64))
            col_used[attr_col[x]] = True
            work.filled[attr_col[x]] += 1
            insert_attribute(rec, s, x)
            s += 1
        if s == 0:
            work.counters[STATUS] = STALLED  # budget left but no attribute has positive weight
            break
        write_record(out, n_written, attr_col, rec, s)
        n_written += 1
        work.counters[RECORDS_MADE] += 1
    return n_written, u_used
