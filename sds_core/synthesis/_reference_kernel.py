"""Compiled inner loops of aggregate-seeded synthesis (used only by
:mod:`sds_core.synthesis.generator`).

One record is built attribute by attribute exactly as the reference does (spec §2.1), sequentially,
so budgets and synthetic counts evolve per attribute: the kernel of ``complete_records=False``
(completion mode is :mod:`sds_core.synthesis._completion_kernel`, which reuses the key below).
Functions are numba-compiled when numba is installed; without it they run as plain (slow,
same-result) Python, which is enough for tiny tests.
"""

from __future__ import annotations

import numpy as np

from sds_core._jit import _jit
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
from sds_core.synthesis.layout import Layout, lookup

__all__ = ["synthesize_records"]


@_jit
def _insert_sorted(rows: np.ndarray, r: int, n: int, value: np.int64) -> None:
    """Insert value into the ascending rows[r, :n] (one slot free at n)."""
    p = n
    while p > 0 and rows[r, p - 1] > value:
        rows[r, p] = rows[r, p - 1]
        p -= 1
    rows[r, p] = value


@_jit
def _append_sub(
    subs: np.ndarray,
    sw: np.ndarray,
    nsubs: np.ndarray,
    a: int,
    ci: int,
    w: np.int64,
) -> None:
    """Record sub-combination ``ci`` of candidate ``a``: its index and its sorted weight."""
    ns = nsubs[a]
    subs[a, ns] = ci
    _insert_sorted(sw, a, ns, w)
    nsubs[a] = ns + 1


@_jit
def _quantile_sorted(x: np.ndarray, r: int, n: int, p: float) -> float:
    """R-8 (median-unbiased) quantile of the ascending x[r, :n], as statrs / numpy."""
    h = (n + 1.0 / 3.0) * p + 1.0 / 3.0
    hf = int(np.floor(h))
    if hf <= 0 or p == 0.0:
        return float(x[r, 0])
    if hf >= n or p == 1.0:
        return float(x[r, n - 1])
    a = float(x[r, hf - 1])
    return a + (h - hf) * (float(x[r, hf]) - a)


@_jit
def _combo_key(sub: np.ndarray, nsub: int, a: int, x: int, base: int) -> np.int64:
    """Key of sorted(sub[:nsub] + [a, x]) (x < 0 means only a): Horner over ids + 1."""
    key = np.int64(0)
    lo = min(a, x) if x >= 0 else a
    hi = max(a, x) if x >= 0 else -1
    i = 0
    placed_lo = False
    placed_hi = hi < 0
    while i < nsub or not placed_lo or not placed_hi:
        if not placed_lo and (i >= nsub or lo < sub[i]):
            key = key * base + lo + 1
            placed_lo = True
        elif placed_lo and not placed_hi and (i >= nsub or hi < sub[i]):
            key = key * base + hi + 1
            placed_hi = True
        else:
            key = key * base + sub[i] + 1
            i += 1
    return key


@_jit
def synthesize_records(
    out: np.ndarray, uniforms: np.ndarray, lay: Layout, run: RunSettings, work: WorkState
) -> tuple[int, int]:
    """Build up to ``out.shape[0]`` records into ``out`` (global attribute ids, -1 = empty).

    Args:
        out: (records, n_cols) output buffer.
        uniforms: uniforms in [0, 1), one per attribute picked.
        lay: the aggregates' :class:`~sds_core.synthesis.layout.Layout`. With dense pairs and
            R >= 3 the triples of a new pair {x, y} are read from its CSR list (sequential
            reads), everything else through the dense pair table or the hash table.
        run: the :class:`~sds_core.synthesis._state.RunSettings`.
        work: the batch's :class:`~sds_core.synthesis._state.WorkState`; budgets, synthetic
            counts and counters are updated in place so chunks can be chained. Its status is
            set to DONE when the budget is exhausted and no reset is allowed (synthesis is
            complete), STALLED when no attribute has a positive weight although budget remains.

    Returns:
        (records written, uniforms consumed).
    """
    # local names for the arrays the loops read most
    attr_col, counts, idx1, syn, avail = lay.attr_col, lay.counts, lay.idx1, work.syn, work.avail
    tri = lay.triples
    n_attr = attr_col.shape[0]
    n_cols = out.shape[1]
    R = lay.reporting_length
    use_syn = run.use_synthetic_counts
    has_csr = tri.start.shape[0] > 1 and R >= 3
    is_live = np.zeros(n_attr, dtype=np.bool_)
    found = np.zeros(n_attr, dtype=np.int64)
    # per-attribute candidate state for the record being built
    live = np.empty(n_attr, dtype=np.int64)
    subs = np.empty((n_attr, run.sub_cap), dtype=np.int64)  # sub-combinations holding a
    nsubs = np.zeros(n_attr, dtype=np.int64)
    full_idx = np.full(n_attr, -1, dtype=np.int64)  # index of r + {a} while |r + {a}| <= R
    cand = np.empty(n_attr, dtype=np.int64)
    wts = np.empty(n_attr, dtype=np.int64)
    # sorted sub-combination weights per candidate: adjusted (A - syn) if use_syn else raw A
    sw = np.empty((n_attr, run.sub_cap), dtype=np.int64)
    rec = np.empty(n_cols, dtype=np.int64)  # sorted attribute ids of the record
    col_used = np.zeros(n_cols, dtype=np.bool_)
    sub = np.empty(max(R, 1), dtype=np.int64)
    sidx = np.empty(max(R, 1), dtype=np.int64)
    n_written = 0
    u_used = 0
    n_out = out.shape[0]
    while n_written < n_out:
        if work.counters[BUDGET_LEFT] <= 0 and not new_budget_cycle(
            work, lay.budget, run.reset_budgets
        ):
            break
        if u_used + n_cols > uniforms.shape[0]:
            break
        # ---- build one record -------------------------------------------------------------
        s = 0
        n_live = 0
        col_used[:] = False
        while True:
            n_c = 0
            total = np.int64(0)
            if s == 0:
                for a in range(n_attr):
                    i1 = idx1[a]
                    if avail[a] > 0 and i1 >= 0:
                        w = counts[i1] - syn[i1] if use_syn else counts[i1]
                        if w > 0:
                            cand[n_c] = a
                            wts[n_c] = w
                            total += w
                            n_c += 1
            else:
                j = 0
                while j < n_live:
                    a = live[j]
                    j += 1
                    if col_used[attr_col[a]] or avail[a] <= 0:
                        continue
                    if s + 1 <= R:
                        fi = full_idx[a]
                        w = counts[fi] - syn[fi] if use_syn else counts[fi]
                    else:
                        if use_syn and sw[a, 0] <= 0:
                            continue  # an exhausted sub-combination
                        q = _quantile_sorted(sw, a, nsubs[a], run.percentile)
                        w = np.int64(np.floor(q + 0.5))  # weights > 0: half away from zero
                    if w > 0:
                        cand[n_c] = a
                        wts[n_c] = w
                        total += w
                        n_c += 1
            if n_c == 0:
                break
            x = cand[weighted_index(wts, n_c, total, uniforms[u_used])]
            u_used += 1
            # ---- accept x: budgets, synthetic counts ---------------------------------------
            if avail[x] > 0:
                avail[x] -= 1
                work.counters[BUDGET_LEFT] -= 1
            if s == 0:
                if use_syn:
                    syn[idx1[x]] += 1
            elif use_syn:
                for t in range(nsubs[x]):
                    ci = subs[x, t]
                    syn[ci] += 1
                    if has_csr and tri.first <= ci < tri.first + tri.pos.shape[0]:
                        for q in range(3):
                            pos = tri.pos[ci - tri.first, q]
                            if pos >= 0:
                                work.triple_syn[pos] += 1
            col_used[attr_col[x]] = True
            if s == 0:
                # every attribute of another column with a reported 1-combination is live
                for a in range(n_attr):
                    if idx1[a] >= 0 and attr_col[a] != attr_col[x]:
                        live[n_live] = a
                        is_live[a] = True
                        n_live += 1
                        i1 = idx1[a]
                        subs[a, 0] = i1
                        sw[a, 0] = counts[i1] - syn[i1] if use_syn else counts[i1]
                        nsubs[a] = 1
            # new sub-combinations {a, x} + S, S a subset of the record (|S| <= R - 2)
            use_csr = has_csr and s >= 1
            if use_csr:
                # triples {a, x, y}, y in the record: walk the reported third attributes of each
                # pair {x, y} (sequential reads) instead of probing the hash per candidate
                for j in range(n_live):
                    found[live[j]] = 0
                for t in range(s):
                    p = lay.pair_idx[x * n_attr + rec[t]]
                    if p < 0:
                        continue
                    for e in range(tri.start[p], tri.start[p + 1]):
                        a = tri.third[e]
                        if is_live[a]:
                            found[a] += 1
                            ci = tri.combo[e]
                            w = tri.count[e]  # counts and synthetic counts read in walk order
                            w_syn = w - work.triple_syn[e] if use_syn else w
                            _append_sub(subs, sw, nsubs, a, ci, w_syn)
                            if s == 1:
                                full_idx[a] = ci
            j = 0
            while j < n_live:
                a = live[j]
                if col_used[attr_col[a]]:
                    is_live[a] = False
                    live[j] = live[n_live - 1]
                    n_live -= 1
                    continue
                ok = True
                kmax = min(R - 2, s)
                for k in range(kmax + 1):
                    if k == 1 and use_csr:
                        if found[a] < s:
                            ok = False
                            break
                        continue
                    # enumerate k-subsets of rec[:s] in lexicographic index order
                    for t in range(k):
                        sidx[t] = t
                    while True:
                        for t in range(k):
                            sub[t] = rec[sidx[t]]
                        if k == 0 and lay.dense_pairs:
                            ci = lay.pair_idx[x * n_attr + a]
                        else:
                            ci = lookup(lay.table, _combo_key(sub, k, a, x, lay.table.base))
                        if ci < 0:
                            ok = False
                            break
                        w = counts[ci]
                        _append_sub(subs, sw, nsubs, a, ci, w - syn[ci] if use_syn else w)
                        if k == s:
                            full_idx[a] = ci
                        if not next_subset(sidx, k, s):
                            break
                    if not ok:
                        break
                if ok:
                    j += 1
                else:  # an unreported combination: a is out for the rest of this record
                    is_live[a] = False
                    live[j] = live[n_live - 1]
                    n_live -= 1
            insert_attribute(rec, s, x)
            s += 1
            if s >= n_cols:
                break
        # ---- record done ------------------------------------------------------------------
        for j in range(n_live):
            is_live[live[j]] = False
        if s == 0:
            # no attribute has positive weight although budget remains: cannot progress
            work.counters[STATUS] = STALLED
            break
        write_record(out, n_written, attr_col, rec, s)
        n_written += 1
        work.counters[RECORDS_MADE] += 1
    return n_written, u_used
