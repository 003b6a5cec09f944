"""Marginal cells: every 1..3-way marginal's occurring cells and counts, counted where the
records are and summed, and the marginal fidelity (TVD) of the release evaluation from them.

The sensitive side's cells come from its partitions (:func:`partition_marginals`), the
synthetic side's in the joint coding of both domains (:func:`fidelity_mappings`,
:func:`partition_fidelity_cells`), or from a table in this process one marginal at a time
(:class:`LocalCells`); :func:`fidelity_from_cells` turns both into
:func:`~sds_core.evaluation.metrics.marginal_fidelity`'s result, number for number.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sds_core._jit import _jit
from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.errors import require
from sds_core.evaluation.agreement import add_keyed_counts
from sds_core.evaluation.metrics import fidelity_summary
from sds_core.evaluation.records import RowSlices
from sds_core.evaluation.tables import column_codes, mixed_radix

Cells = dict[tuple[int, ...], tuple[NDArray[np.integer], NDArray[np.integer]]]
"""Per marginal (column indices): its occurring cells' keys and their counts, keys ascending."""
DENSE_CELLS = 1 << 16
_INT32_MAX = int(np.iinfo(np.int32).max)


def _cells(keys: NDArray[np.int64], cells: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    if cells <= DENSE_CELLS:
        counts = np.bincount(keys, minlength=cells).astype(np.int64)
        nz = np.flatnonzero(counts)
        return nz.astype(np.int64), counts[nz]
    uniq, counts = np.unique(keys, return_counts=True)
    return uniq.astype(np.int64), counts.astype(np.int64)


@_jit
def _dense_counts(
    codes: NDArray[np.int64],
    cols: NDArray[np.int64],
    mults: NDArray[np.int64],
    offsets: NDArray[np.int64],
    out: NDArray[np.int64],
) -> None:  # pragma: no cover - compiled
    """One pass over the records (``codes`` records x columns): every dense marginal's cell
    count (``cols`` padded with -1)."""
    n, m, width = codes.shape[0], cols.shape[0], cols.shape[1]
    for r in range(n):
        for i in range(m):
            key = offsets[i]
            for t in range(width):
                c = cols[i, t]
                if c < 0:
                    break
                key += codes[r, c] * mults[i, t]
            out[key] += 1


def marginal_cells(codes: NDArray[np.integer], cards: list[int], max_order: int) -> Cells:
    """Cell counts of every 1..max_order-way marginal of ``codes`` (columns x records, codes in
    0..cards-1), keyed by mixed radix (last column fastest). Marginals of up to
    :data:`DENSE_CELLS` cells are counted in one compiled pass over the records."""
    return _record_cells(
        np.ascontiguousarray(np.asarray(codes, dtype=np.int64).T), cards, max_order
    )


def _record_cells(records: NDArray[np.integer], cards: list[int], max_order: int) -> Cells:
    """:func:`marginal_cells` of ``records`` (records x columns, C order)."""
    every, size = _marginals(cards, max_order)
    out = _dense_cells(records, cards, [cols for cols in every if size[cols] <= DENSE_CELLS], size)
    for cols in every:
        if cols not in out:
            out[cols] = _sparse_cells(records, cards, cols, size[cols])
    return {cols: out[cols] for cols in every}


def _marginals(
    cards: list[int], max_order: int
) -> tuple[list[tuple[int, ...]], dict[tuple[int, ...], int]]:
    """Every 1..max_order-way marginal (column indices, in order) and its cell count."""
    every = [
        cols
        for order in range(1, min(max_order, len(cards)) + 1)
        for cols in itertools.combinations(range(len(cards)), order)
    ]
    return every, {cols: int(np.prod([cards[c] for c in cols], dtype=object)) for cols in every}


def _dense_cells(
    records: NDArray[np.integer],
    cards: list[int],
    dense: list[tuple[int, ...]],
    size: dict[tuple[int, ...], int],
) -> Cells:
    """The cells of the ``dense`` marginals, counted in one compiled pass over the records."""
    out: Cells = {}
    if not dense:
        return out
    width = max(len(c) for c in dense)
    col_arr = np.full((len(dense), width), -1, dtype=np.int64)
    mults = np.zeros((len(dense), width), dtype=np.int64)
    offsets = np.zeros(len(dense) + 1, dtype=np.int64)
    for i, cols in enumerate(dense):
        col_arr[i, : len(cols)] = cols
        mults[i, : len(cols)] = mixed_radix(cards, cols)
        offsets[i + 1] = offsets[i] + size[cols]
    counts = np.zeros(int(offsets[-1]), dtype=np.int64)
    _dense_counts(records, col_arr, mults, offsets[:-1].copy(), counts)
    for i, cols in enumerate(dense):
        block = counts[offsets[i] : offsets[i + 1]]
        nz = np.flatnonzero(block)
        out[cols] = nz.astype(np.int64), block[nz]
    return out


def _sparse_cells(
    records: NDArray[np.integer], cards: list[int], cols: tuple[int, ...], cells: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """One marginal's cells from the records' int64 keys."""
    key = records[:, cols[0]].astype(np.int64)
    for c in cols[1:]:
        np.multiply(key, cards[c], out=key)
        np.add(key, records[:, c], out=key)
    return _cells(key, cells)


class LocalCells(Mapping[tuple[int, ...], tuple[NDArray[np.integer], NDArray[np.integer]]]):
    """The marginal cells of records in this process in the joint coding of
    :func:`fidelity_mappings` (what :func:`partition_fidelity_cells` gives summed over every
    slice): the records' joint codes in the smallest integer type, the marginals of up to
    :data:`DENSE_CELLS` cells counted in one pass up front and every other one counted when
    asked for and not kept, so one marginal's cells are made at a time, not all of them."""

    def __init__(
        self,
        parts: RowSlices,
        mappings: list[NDArray[np.int64]],
        cards: list[int],
        max_order: int,
    ) -> None:
        top = max(cards)
        dtype = np.int8 if top <= 1 << 7 else np.int16 if top <= 1 << 15 else np.int32
        records = np.empty((parts.n_records, len(cards)), dtype=dtype)
        at = 0
        for part in parts.slices():  # joint codes a slice at a time (int64 per slice only)
            s = column_codes(part)
            for j, (m, col) in enumerate(zip(mappings, part.domain.columns, strict=True)):
                records[at : at + part.n_records, j] = m[s[col][1]]
            at += part.n_records
        self.records, self.cards = records, cards
        self.every, self.size = _marginals(cards, max_order)
        self.dense = _dense_cells(
            records,
            cards,
            [cols for cols in self.every if self.size[cols] <= DENSE_CELLS],
            self.size,
        )

    def __getitem__(self, cols: tuple[int, ...]) -> tuple[NDArray[np.integer], NDArray[np.integer]]:
        if cols in self.dense:
            return self.dense[cols]
        if cols not in self.size:
            raise KeyError(cols)
        return _sparse_cells(self.records, self.cards, cols, self.size[cols])

    def __iter__(self) -> Iterator[tuple[int, ...]]:
        return iter(self.every)

    def __len__(self) -> int:
        return len(self.every)


def partition_marginals(table: PreparedTable, cards: list[int], max_order: int) -> Cells:
    """:func:`marginal_cells` of a sensitive partition, an empty cell coded as its column's
    label count (the ``""`` label of :func:`~sds_core.evaluation.tables.column_codes`), keys
    and counts int32 where they fit (:func:`_narrow`)."""
    records = table.codes.astype(np.int64)
    for j, labels in enumerate(table.domain.labels):
        column = records[:, j]
        column[column < 0] = len(labels)
    return _narrow(_record_cells(records, cards, max_order), cards, max_order, table.n_records)


def _narrow(cells: Cells, cards: list[int], max_order: int, n_records: int) -> Cells:
    """A partition's cells with keys and counts int32 where they fit (what the driver
    receives, summed: the cells of every marginal at once, half the bytes of int64)."""
    _, size = _marginals(cards, max_order)
    narrow_counts = n_records <= _INT32_MAX
    return {
        cols: (
            keys.astype(np.int32) if size[cols] <= _INT32_MAX else keys,
            counts.astype(np.int32) if narrow_counts else counts,
        )
        for cols, (keys, counts) in cells.items()
    }


def add_cells(a: Cells, b: Cells) -> Cells:
    """The sum of two marginals' cell counts (each side's keys ascending and distinct: merged
    by position, without an inverse or float weights over both sides; the keys' and counts'
    integer types kept, counts widened to int64 where int32 could overflow)."""
    return {cols: add_keyed_counts(side, b[cols]) for cols, side in a.items()}


def _abs_total(
    a: tuple[NDArray[np.integer], NDArray[np.integer]],
    b: tuple[NDArray[np.integer], NDArray[np.integer]],
    wa: int,
    wb: int,
) -> int:
    """sum over the union of cells of |wa * a - wb * b| (exact, int64; counts >= 0, each
    side's keys ascending and distinct: the cells of ``a`` found in ``b`` by position, the
    others of either side add their own weighted count)."""
    (ka, ca), (kb, cb) = a, b
    wca, wcb = ca.astype(np.int64) * wa, cb.astype(np.int64) * wb
    if not kb.size:
        return int(wca.sum())
    pos = np.minimum(np.searchsorted(kb, ka), kb.size - 1)
    hit = kb[pos] == ka
    common = wcb[pos[hit]]
    total = int(np.abs(wca[hit] - common).sum()) + int(wca[~hit].sum())
    return total + int(wcb.sum()) - int(common.sum())


def fidelity_mappings(
    domain: Domain, synthetic: Domain
) -> tuple[list[int], list[NDArray[np.int64]]]:
    """The joint coding of :func:`~sds_core.evaluation.metrics.marginal_fidelity` from the two
    domains: per column the sensitive labels, ``""``, then the synthetic's other labels; returns
    the cardinalities and, per column, the joint code of each synthetic code (empty: last)."""
    require(
        list(domain.columns) == list(synthetic.columns),
        f"original and synthetic columns differ: {list(domain.columns)} vs "
        f"{list(synthetic.columns)}",
    )
    cards, mappings = [], []
    for labels, s_labels in zip(domain.labels, synthetic.labels, strict=True):
        union = {lab: i for i, lab in enumerate([*labels, ""])}
        mappings.append(
            np.asarray([union.setdefault(lab, len(union)) for lab in [*s_labels, ""]], np.int64)
        )
        cards.append(max(len(union), 1))
    return cards, mappings


def partition_fidelity_cells(
    table: PreparedTable, mappings: list[NDArray[np.int64]], cards: list[int], max_order: int
) -> Cells:
    """A synthetic partition's marginal cells in the joint coding of :func:`fidelity_mappings`,
    keys and counts int32 where they fit (:func:`_narrow`)."""
    s = column_codes(table)
    rows = [m[s[col][1]] for m, col in zip(mappings, table.domain.columns, strict=True)]
    codes = np.asarray(rows, dtype=np.int64).reshape(len(cards), table.n_records)
    return _narrow(marginal_cells(codes, cards, max_order), cards, max_order, table.n_records)


def fidelity_from_cells(
    domain: Domain,
    n_o: int,
    original: Cells,
    n_s: int,
    synth: Mapping[tuple[int, ...], tuple[NDArray[np.integer], NDArray[np.integer]]],
    cards: list[int],
    max_order: int,
) -> dict[str, Any]:
    """:func:`~sds_core.evaluation.metrics.marginal_fidelity` from both sides' marginal cells
    (the 1-way cells give the empty shares)."""
    require(n_o > 0 and n_s > 0, "marginal_fidelity needs two non-empty tables")
    require(n_o * n_s < 1 << 61, f"tables too large to compare: {n_o} x {n_s} records")
    empty_o: dict[str, float] = {}
    empty_s: dict[str, float] = {}
    for j, (col, labels) in enumerate(zip(domain.columns, domain.labels, strict=True)):
        e = len(labels)
        for cells, n, out in ((original, n_o, empty_o), (synth, n_s, empty_s)):
            keys, hits = cells[(j,)]
            out[col] = float(int(hits[keys == e].sum()) / n)
    top = min(max_order, len(cards))
    tvds: dict[int, list[float]] = {order: [] for order in range(1, top + 1)}
    for order in range(1, top + 1):
        for cols in itertools.combinations(range(len(cards)), order):
            total = _abs_total(original[cols], synth[cols], n_s, n_o)
            tvds[order].append(0.5 * float(total) / float(n_o * n_s))
    return fidelity_summary(domain.columns, tvds, empty_o, empty_s)
