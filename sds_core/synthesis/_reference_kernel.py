"""Compiled inner loops of aggregate-seeded synthesis (used only by
:mod:`sds_core.synthesis.generator`).

One record is built attribute by attribute exactly as the reference does (spec §2.1), sequentially,
so budgets and synthetic counts evolve per attribute: the kernel of ``complete_records=False``
(completion mode is :mod:`sds_core.synthesis._completion_kernel`, which reuses the lookups below).
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

__all__ = ["build_table", "synthesize_records"]


@_jit
def _slot(key: np.int64, bits: np.int64) -> np.int64:
    h = np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)
    return np.int64(h >> np.uint64(64 - bits))


@_jit
def build_table(keys: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Open-addressing hash table ``key -> index`` (linear probing, 2**bits slots)."""
    size = 1 << bits
    mask = size - 1
    tkeys = np.full(size, -1, dtype=np.int64)
    tvals = np.full(size, -1, dtype=np.int64)
    for i in range(keys.shape[0]):
        s = _slot(keys[i], bits)
        while tkeys[s] != -1:
            s = (s + 1) & mask
        tkeys[s] = keys[i]
        tvals[s] = i
    return tkeys, tvals


@_jit
def _lookup(tkeys: np.ndarray, tvals: np.ndarray, bits: np.int64, key: np.int64) -> np.int64:
    mask = (1 << bits) - 1
    s = _slot(key, bits)
    while True:
        k = tkeys[s]
        if k == key:
            return tvals[s]
        if k == -1:
            return -1
        s = (s + 1) & mask


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
    out: np.ndarray,
    uniforms: np.ndarray,
    attr_col: np.ndarray,
    counts: np.ndarray,
    syn: np.ndarray,
    idx1: np.ndarray,
    tkeys: np.ndarray,
    tvals: np.ndarray,
    bits: int,
    base: int,
    reporting_length: int,
    avail: np.ndarray,
    budget0: np.ndarray,
    state: np.ndarray,
    use_syn: bool,
    percentile: float,
    sub_cap: int,
    pair_idx: np.ndarray,
    csr_start: np.ndarray,
    csr_attr: np.ndarray,
    csr_combo: np.ndarray,
    csr_count: np.ndarray,
    csr_syn: np.ndarray,
    trip_pos: np.ndarray,
    trip_first: int,
) -> tuple[int, int]:
    """Build up to ``out.shape[0]`` records into ``out`` (global attribute ids, -1 = empty).

    ``pair_idx[a * n_attr + b]`` is the index of the pair {a, b} (-1 if absent) when dense
    (length n_attr**2), otherwise a dummy of length 1. With dense pairs and R >= 3, the triples
    holding pair p are ``csr_attr / csr_combo[csr_start[p]:csr_start[p + 1]]`` (third attribute,
    triple index; ``csr_start`` has one entry per combination + 1, else length 1), with the
    triple's count and synthetic count copied alongside (``csr_count``, ``csr_syn``) so the walk
    reads memory in order; ``trip_pos[t]`` lists the 3 CSR positions of triple ``trip_first + t``.
    ``state`` = [total remaining budget, records made so far, reset allowed (0/1), stop flag];
    ``avail``, ``syn`` and ``state`` are updated in place so chunks can be chained.
    Returns (records written, uniforms consumed). ``state[3]`` is set to 1 when the budget is
    exhausted and no reset is allowed (synthesis is complete).
    """
    n_attr = attr_col.shape[0]
    n_cols = out.shape[1]
    has_csr = csr_start.shape[0] > 1 and reporting_length >= 3
    is_live = np.zeros(n_attr, dtype=np.bool_)
    found = np.zeros(n_attr, dtype=np.int64)
    dense_pairs = pair_idx.shape[0] == n_attr * n_attr  # else pairs go through the hash table
    R = reporting_length
    # per-attribute candidate state for the record being built
    live = np.empty(n_attr, dtype=np.int64)
    subs = np.empty((n_attr, sub_cap), dtype=np.int64)  # indices of sub-combinations holding a
    nsubs = np.zeros(n_attr, dtype=np.int64)
    full_idx = np.full(n_attr, -1, dtype=np.int64)  # index of r + {a} while |r + {a}| <= R
    cand = np.empty(n_attr, dtype=np.int64)
    wts = np.empty(n_attr, dtype=np.int64)
    # sorted sub-combination weights per candidate: adjusted (A - syn) if use_syn else raw A
    sw = np.empty((n_attr, sub_cap), dtype=np.int64)
    rec = np.empty(n_cols, dtype=np.int64)  # sorted attribute ids of the record
    col_used = np.zeros(n_cols, dtype=np.bool_)
    sub = np.empty(max(R, 1), dtype=np.int64)
    sidx = np.empty(max(R, 1), dtype=np.int64)
    n_written = 0
    u_used = 0
    n_out = out.shape[0]
    while n_written < n_out:
        if state[0] <= 0 and not new_budget_cycle(avail, budget0, syn, csr_syn, state):
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
                        q = _quantile_sorted(sw, a, nsubs[a], percentile)
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
                state[0] -= 1
            if s == 0:
                if use_syn:
                    syn[idx1[x]] += 1
            elif use_syn:
                for t in range(nsubs[x]):
                    ci = subs[x, t]
                    syn[ci] += 1
                    if has_csr and trip_first <= ci < trip_first + trip_pos.shape[0]:
                        for q in range(3):
                            pos = trip_pos[ci - trip_first, q]
                            if pos >= 0:
                                csr_syn[pos] += 1
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
                    p = pair_idx[x * n_attr + rec[t]]
                    if p < 0:
                        continue
                    for e in range(csr_start[p], csr_start[p + 1]):
                        a = csr_attr[e]
                        if is_live[a]:
                            found[a] += 1
                            ci = csr_combo[e]
                            w = csr_count[e]  # counts and synthetic counts read in walk order
                            _append_sub(subs, sw, nsubs, a, ci, w - csr_syn[e] if use_syn else w)
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
                        if k == 0 and dense_pairs:
                            ci = pair_idx[x * n_attr + a]
                        else:
                            ci = _lookup(tkeys, tvals, bits, _combo_key(sub, k, a, x, base))
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
            state[3] = 2
            break
        write_record(out, n_written, attr_col, rec, s)
        n_written += 1
        state[1] += 1
    return n_written, u_used
