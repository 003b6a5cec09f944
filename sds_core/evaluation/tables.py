"""Per-record and per-marginal computations behind :mod:`sds_core.evaluation.metrics`.

Order-preserving combination keys, each record's smallest count among given combinations (the
risk metrics), and cell codes and joint-table marginal sums (the TVD). Everything reads
sensitive data: results stay inside the evaluation.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.errors import require
from sds_core.marginals._count_kernels import (
    CliqueKey,
    ComparedTables,
    compact_codes,
    joint_groups,
    min_rank_dense,
    min_rank_sorted,
    signed_counts,
)

JOINT_CELLS = 1 << 20
"""Largest joint table of a column group (TVD sums, risk lookups)."""
RISK_DENSE_BYTES = 1 << 26
"""Largest dense rank table of one clique; bigger cliques use sorted keys."""


def row_keys(attrs: NDArray[np.integer], base: int) -> NDArray[np.int64]:
    """Order-preserving int64 key of each row: digits ``attr + 1`` in radix ``base``."""
    key = np.zeros(attrs.shape[0], dtype=np.int64)
    for j in range(attrs.shape[1]):
        key *= base
        key += attrs[:, j]
        key += 1
    return key


def radix_multipliers(domain: Domain, cols: tuple[int, ...]) -> tuple[NDArray[np.int64], int]:
    """Multipliers of the local key ``sum((code + 1) * mult)`` of a clique, and its key range."""
    radix = [domain.cardinalities[c] + 1 for c in cols]
    mult = np.ones(len(cols), dtype=np.int64)
    for i in range(len(cols) - 2, -1, -1):
        mult[i] = mult[i + 1] * radix[i + 1]
    return mult, int(mult[0]) * radix[0]


def _clique_keys(cols: NDArray[np.integer], base: int) -> NDArray[np.integer]:
    """:func:`row_keys` of the combinations' column rows in the smallest integer type that
    holds them (the rows of a length hold up to every combination of it)."""
    top = base ** cols.shape[1]
    if top >= 1 << 31:
        return row_keys(cols, base)
    key: NDArray[np.integer] = np.zeros(
        cols.shape[0], dtype=np.int16 if top < 1 << 15 else np.int32
    )
    for j in range(cols.shape[1]):
        key *= base
        key += cols[:, j]
        key += 1
    return key


def record_min_counts(
    domain: Domain,
    codes: NDArray[np.int32],
    rare: dict[int, tuple[NDArray[np.integer], NDArray[np.integer]]],
) -> NDArray[np.int64]:
    """Per record, the smallest count among the given combinations it holds (int64 max: none).

    ``rare`` maps a length to (attrs, counts); rows whose columns are not strictly ascending match
    no record, and of repeated rows the first counts. Counts are replaced by their rank among the
    distinct counts, so each clique's lookup table is small (a dense array, or sorted keys when the
    clique is too big), and one compiled pass per clique updates the records' smallest rank; cliques
    inside a :func:`~sds_core.marginals._count_kernels.joint_groups` group share one pass over the
    group's joint cells.
    """
    n = codes.shape[0]
    big = np.iinfo(np.int64).max
    if not rare:
        return np.full(n, big, dtype=np.int64)
    values = np.unique(np.concatenate([c for _, c in rare.values()])).astype(np.int64)
    none = values.size + 1  # rank of "no such combination"
    rank_dtype: type[np.integer] = (
        np.uint8 if none <= 255 else np.uint16 if none <= 65535 else np.int32
    )
    best = np.full(n, none, dtype=rank_dtype)
    codes_t = compact_codes(codes)
    offsets = np.asarray(domain.offsets[:-1], dtype=np.int64)
    # the combinations' columns in the smallest integer type (the lookups hold up to every
    # combination of a length: int64 (m, k) columns and their differences took 40 bytes a row)
    col_dtype: type[np.integer] = (
        np.int8
        if domain.n_columns < 1 << 7
        else np.int16
        if domain.n_columns < 1 << 15
        else np.int32
    )
    attr_col: NDArray[np.integer] = np.asarray(domain.attribute_columns(), dtype=col_dtype)
    # cliques inside a joint group: their smallest rank per joint cell of the group, then one
    # pass over the records for the group
    radices = [c + 1 for c in domain.cardinalities]
    groups = [
        (g, *radix_multipliers(domain, g)) for g in joint_groups(radices, min(JOINT_CELLS, n // 16))
    ]
    g_best = [np.full(size, none, dtype=rank_dtype) for _, _, size in groups]
    g_used = [False] * len(groups)
    for attrs, counts in rare.values():
        cols = attr_col[attrs]
        ok = (cols[:, 1:] > cols[:, :-1]).all(axis=1)
        if not ok.all():
            attrs, counts, cols = attrs[ok], counts[ok], cols[ok]
        del ok
        clique = _clique_keys(cols, domain.n_columns + 1)
        order = np.argsort(clique, kind="stable")
        clique = clique[order]
        bounds = np.flatnonzero(clique[1:] != clique[:-1]) + 1
        del clique
        for rows in np.split(order, bounds) if order.size else []:
            cl = tuple(int(c) for c in cols[rows[0]])
            mult, size = radix_multipliers(domain, cl)
            digits = attrs[rows].astype(np.int64) - offsets[list(cl)] + 1
            keys, first = np.unique(digits @ mult, return_index=True)
            ranks = (np.searchsorted(values, counts[rows][first]) + 1).astype(rank_dtype)
            col_arr = np.asarray(cl, dtype=np.int64)
            gi = next((i for i, (g, _, _) in enumerate(groups) if set(cl) <= set(g)), None)
            if gi is not None:
                table = np.full(size, none, dtype=rank_dtype)
                table[keys] = ranks
                g, _, g_size = groups[gi]
                digits = np.indices([radices[c] for c in g]).reshape(len(g), g_size)
                cell_keys = sum(digits[g.index(c)] * mult[i] for i, c in enumerate(cl))
                np.minimum(g_best[gi], table[cell_keys], out=g_best[gi])
                g_used[gi] = True
            elif size * np.dtype(rank_dtype).itemsize <= RISK_DENSE_BYTES and size <= 64 * n + 4096:
                table = np.full(size, none, dtype=rank_dtype)
                table[keys] = ranks
                min_rank_dense(codes_t, CliqueKey(col_arr, mult), table, best)
            else:
                min_rank_sorted(codes_t, CliqueKey(col_arr, mult), keys, ranks, best)
    for (g, g_mult, _), table, used in zip(groups, g_best, g_used, strict=True):
        if used:
            min_rank_dense(codes_t, CliqueKey(np.asarray(g, dtype=np.int64), g_mult), table, best)
    found = best < none
    return np.where(found, values[np.where(found, best, 1).astype(np.int64) - 1], big)


def column_codes(
    x: pd.DataFrame | PreparedTable,
) -> dict[str, tuple[list[str], NDArray[np.integer]]]:
    """Per column: (labels, codes into labels); empty cells are the label ""."""
    out: dict[str, tuple[list[str], NDArray[np.integer]]] = {}
    if isinstance(x, PreparedTable):
        by_col = compact_codes(x.codes)
        for codes, col, labs in zip(by_col, x.domain.columns, x.domain.labels, strict=True):
            c = codes.astype(np.int32)
            c[c < 0] = len(labs)
            out[col] = ([*labs, ""], c)
        return out
    require(
        isinstance(x, pd.DataFrame),
        f"expected a DataFrame or PreparedTable, got {type(x).__name__}",
    )
    for col in x.columns:
        values = x[col].astype(object).where(x[col].notna(), "").astype(str).to_numpy()
        codes, uniques = pd.factorize(values)
        out[str(col)] = ([str(u) for u in uniques], codes)
    return out


def mixed_radix(cards: list[int], cols: tuple[int, ...]) -> NDArray[np.int64]:
    """Multipliers of the key ``sum(code * mult)`` over ``cols`` (last column fastest)."""
    mult = np.ones(len(cols), dtype=np.int64)
    for i in range(len(cols) - 2, -1, -1):
        mult[i] = mult[i + 1] * cards[cols[i + 1]]
    return mult


def joint_marginal_sums(
    codes_o: NDArray[np.integer], codes_s: NDArray[np.integer], cards: list[int], top: int
) -> dict[tuple[int, ...], int]:
    """``sum |n_s c_o - n_o c_s|`` of the marginals (<= top columns) inside the
    :func:`joint_groups`, summed from one joint table per group (JOINT_CELLS cells at most,
    and a sixteenth of the records: beyond that one pass per marginal is cheaper)."""
    n_o, n_s = codes_o.shape[1], codes_s.shape[1]
    out: dict[tuple[int, ...], int] = {}
    for cols in joint_groups(cards, min(JOINT_CELLS, (n_o + n_s) // 16)):
        subs = [
            sub
            for order in range(1, min(top, len(cols)) + 1)
            for sub in itertools.combinations(range(len(cols)), order)
            if tuple(cols[i] for i in sub) not in out
        ]
        if len(subs) < 2:
            continue
        cells = int(np.prod([cards[c] for c in cols]))
        key = CliqueKey(np.asarray(cols, dtype=np.int64), mixed_radix(cards, cols))
        diff = signed_counts(ComparedTables(codes_o, codes_s, w_o=n_s, w_s=n_o), key, cells)
        diff = diff.reshape([cards[c] for c in cols])
        for sub in subs:
            axes = tuple(i for i in range(len(cols)) if i not in sub)
            out[tuple(cols[i] for i in sub)] = int(np.abs(diff.sum(axis=axes)).sum())
    return out
