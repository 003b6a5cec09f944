"""Combination machinery shared by exact and DP aggregation: cliques, local keys, candidates.

A *clique* is a tuple of k ascending column indices; inside a clique a combination has a
mixed-radix *local key* built from its codes, which is how records are counted without
Python loops. :func:`candidates_from_survivors` builds the DP candidate set V_k from the
surviving (k−1)-tuples (spec §1.5 step 1) and :class:`CliqueLookup` maps records to it.
"""

# ruff: noqa: RUF002, RUF003  (docstrings use the spec's math notation: σ, ρ, Δ, −)

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from sds_core.aggregates import CombinationCounts, decode_keys, encode_keys
from sds_core.domain import Domain
from sds_core.errors import invariant

DENSE_CLIQUE_LIMIT = 1 << 22
"""Largest clique (product of cardinalities) counted with a dense array instead of sorting."""


def clique_multipliers(domain: Domain, cols: tuple[int, ...]) -> tuple[NDArray[np.int64], int]:
    """Mixed-radix multipliers of a clique's codes and the clique's size (product of cards)."""
    cards = [domain.cardinalities[c] for c in cols]
    mult = np.ones(len(cols), dtype=np.int64)
    for i in range(len(cols) - 2, -1, -1):
        mult[i] = mult[i + 1] * cards[i + 1]
    size = int(mult[0]) * cards[0] if cols else 1
    return mult, size


def local_keys(
    codes: NDArray[np.int32], cols: tuple[int, ...], mult: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """Local key of every record's combination in the clique, and which records have one.

    Records with an empty cell in any of the clique's columns have no combination there;
    their key is meaningless (the mask is False).
    """
    first = codes[:, cols[0]]
    valid = first >= 0
    key = first.astype(np.int64) * mult[0]
    for i in range(1, len(cols)):
        col = codes[:, cols[i]]
        valid &= col >= 0
        key += col.astype(np.int64) * mult[i]
    return key, valid


def keys_to_attrs(
    domain: Domain, cols: tuple[int, ...], keys: NDArray[np.int64]
) -> NDArray[np.int32]:
    """Global attribute ids (m, k) of the combinations with these local keys in the clique."""
    mult, _ = clique_multipliers(domain, cols)
    out = np.empty((keys.shape[0], len(cols)), dtype=np.int32)
    rest = keys
    for i, c in enumerate(cols):
        code = rest // mult[i]
        rest = rest - code * mult[i]
        out[:, i] = code + domain.offsets[c]
    return out


def attrs_to_local(
    domain: Domain, cols: tuple[int, ...], attrs: NDArray[np.integer]
) -> NDArray[np.int64]:
    """Inverse of :func:`keys_to_attrs` for combinations of this clique."""
    mult, _ = clique_multipliers(domain, cols)
    key = np.zeros(attrs.shape[0], dtype=np.int64)
    for i, c in enumerate(cols):
        key += (attrs[:, i].astype(np.int64) - domain.offsets[c]) * mult[i]
    return key


def group_by_clique(
    domain: Domain, attrs: NDArray[np.integer]
) -> list[tuple[tuple[int, ...], NDArray[np.int64]]]:
    """Split combination rows by clique: ``[(cols, row indices ascending)]`` in clique order."""
    if attrs.shape[0] == 0:
        return []
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


def contains(
    haystack: NDArray[np.integer], needles: NDArray[np.integer], base: int
) -> NDArray[np.bool_]:
    """Which needle rows occur among the (lexicographically sorted) haystack rows."""
    if haystack.shape[0] == 0 or needles.shape[0] == 0:
        return np.zeros(needles.shape[0], dtype=bool)
    hay = encode_keys(haystack, base)
    keys = encode_keys(needles, base)
    pos = np.minimum(np.searchsorted(hay, keys), hay.shape[0] - 1)
    return hay[pos] == keys


def candidates_from_survivors(survivors: CombinationCounts, domain: Domain) -> NDArray[np.int32]:
    """V_k: all k-tuples whose (k−1)-sub-tuples are all in ``survivors`` (S_{k−1}), sorted.

    Apriori join: two survivors sharing their first k−2 attributes and ending in attributes
    of different columns form a candidate; candidates are then kept only if every other
    (k−1)-subset survived too. Because every S_l is downward closed this equals the spec's
    "c ∪ {a}, every sub-combination of lengths 2..k−1 present" (§1.5 step 1).
    """
    prev = survivors.attrs
    km1 = survivors.length
    k = km1 + 1
    if prev.shape[0] < 2:
        return np.zeros((0, k), dtype=np.int32)
    base = max(domain.n_attributes, 2)
    attr_col = domain.attribute_columns()
    p = km1 - 1
    if p == 0:
        starts = np.array([0], dtype=np.int64)
        sizes = np.array([prev.shape[0]], dtype=np.int64)
    else:
        pk = encode_keys(prev[:, :p], base)
        bounds = np.flatnonzero(np.diff(pk)) + 1
        starts = np.concatenate(([0], bounds)).astype(np.int64)
        sizes = np.diff(np.concatenate((starts, [prev.shape[0]])))
    parts: list[NDArray[np.int64]] = []
    for g in np.unique(sizes[sizes >= 2]).tolist():
        gs = starts[sizes == g]
        iu, ju = np.triu_indices(g, 1)
        ri = (gs[:, None] + iu[None, :]).ravel()
        rj = (gs[:, None] + ju[None, :]).ravel()
        li, lj = prev[ri, km1 - 1], prev[rj, km1 - 1]
        ok = attr_col[li] != attr_col[lj]
        ri, lj = ri[ok], lj[ok]
        cand = np.empty((ri.shape[0], k), dtype=np.int64)
        cand[:, :km1] = prev[ri]
        cand[:, km1] = lj
        parts.append(cand)
    if not parts:
        return np.zeros((0, k), dtype=np.int32)
    cand = np.concatenate(parts)
    keep = np.ones(cand.shape[0], dtype=bool)
    for drop in range(p):  # subsets dropping a prefix position; the two joined rows are present
        sub = np.delete(cand, drop, axis=1)
        keep &= contains(prev, sub, base)
    keys = np.sort(encode_keys(cand[keep], base))
    out = decode_keys(keys, base, k)
    invariant(out.shape[0] == np.unique(keys).shape[0], "duplicate candidates from the join")
    return out


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

    def lookup(self, codes: NDArray[np.int32]) -> NDArray[np.int32]:
        """Local candidate index of each record's combination in this clique, -1 if none."""
        key, valid = local_keys(codes, self.cols, self.mult)
        if self.table is not None:
            idx = self.table[np.where(valid, key, 0)]
            return np.where(valid, idx, -1).astype(np.int32, copy=False)
        pos = np.minimum(np.searchsorted(self.keys, key), self.keys.shape[0] - 1)
        hit = valid & (self.keys[pos] == key)
        return np.where(hit, pos, -1).astype(np.int32)


def build_lookups(
    domain: Domain, candidates: NDArray[np.integer], *, dense_budget: int = 1 << 25
) -> list[CliqueLookup]:
    """One :class:`CliqueLookup` per clique that has candidates.

    Small cliques get dense tables (fast fancy indexing) until ``dense_budget`` table
    entries are used; the rest use binary search on sorted local keys.
    """
    groups = group_by_clique(domain, candidates)
    sized = []
    for cols, rows in groups:
        mult, size = clique_multipliers(domain, cols)
        sized.append((size, cols, rows, mult))
    dense_ok: set[tuple[int, ...]] = set()
    used = 0
    for size, cols, _, _ in sorted(sized, key=lambda t: t[0]):
        if size <= DENSE_CLIQUE_LIMIT and used + size <= dense_budget:
            dense_ok.add(cols)
            used += size
    out = []
    for size, cols, rows, mult in sized:
        keys = attrs_to_local(domain, cols, candidates[rows])
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
    present = np.zeros(domain.n_attributes, dtype=bool)
    for c in range(domain.n_columns):
        col = codes[:, c]
        seen = np.bincount(col[col >= 0], minlength=domain.cardinalities[c]) > 0
        present[domain.offsets[c] : domain.offsets[c + 1]] = seen
    return np.flatnonzero(present).astype(np.int32).reshape(-1, 1)
