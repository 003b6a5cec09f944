"""The release evaluation of a sensitive table held in partitions (a cluster backend): the same
result as :func:`~sds_core.evaluation.metrics.evaluate_release` of the whole table.

The sensitive side is reduced to sums: its exact counts one combination length at a time
(:func:`compare_dp_by_length`, :func:`compare_by_length`: only one length's sorted keys and
narrow counts here at a time, never its whole exact aggregates), the counts of records
holding a unique or rare combination (:func:`partition_risk`) and the cell counts of its
1..3-way marginals (:func:`partition_marginals`); every ratio is then computed from those
integers as locally. The synthetic records, partitions of their own (:class:`PartitionedTable`,
as large as the input), are reduced to sums the same way. Records in this process (a
``PreparedTable``, as :class:`RowSlices`) are counted one length at a time and one marginal at
a time (:class:`LocalCells`), their risk record pass summed :data:`SLICE_ROWS` records at a
time: the same integers, at the memory of one length, one marginal or one slice.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from sds_core._jit import _jit
from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable
from sds_core.errors import invariant, require
from sds_core.evaluation.agreement import add_keyed_counts, length_keys
from sds_core.evaluation.metrics import (
    NOT_DP_NOTE,
    AggregateComparison,
    LengthRisk,
    RiskLookups,
    length_risk,
    record_risk_counts,
    risk_lookups_of,
    risk_summary,
)
from sds_core.evaluation.params import EvaluationParams
from sds_core.evaluation.tables import column_codes, mixed_radix
from sds_core.marginals.aggregates import AggregateSet, decode_keys
from sds_core.marginals.exact_counts import exact_aggregates

T = TypeVar("T")
Cells = dict[tuple[int, ...], tuple[NDArray[np.integer], NDArray[np.integer]]]
"""Per marginal (column indices): its occurring cells' keys and their counts, keys ascending."""
DENSE_CELLS = 1 << 16
_INT32_MAX = int(np.iinfo(np.int32).max)


class MapReduce(Protocol):
    """``map_reduce(fn, combine, **kwargs)``: ``fn(partition, **kwargs)`` on every partition (a
    ``PreparedTable``), the results combined pairwise in any order."""

    def __call__(
        self, fn: Callable[..., T], combine: Callable[[T, T], T], /, **kwargs: Any
    ) -> T: ...


class Partitions(Protocol):
    """Records held in partitions: their domain and count and ``map_reduce`` over them (a
    cluster backend, e.g. ``release_store.cluster.backend.DaskBackend``, or
    :class:`RowSlices`)."""

    @property
    def domain(self) -> Domain: ...

    @property
    def n_records(self) -> int: ...

    def map_reduce(
        self, fn: Callable[..., T], combine: Callable[[T, T], T], /, **kwargs: Any
    ) -> T: ...


class PartitionedTable(Partitions, Protocol):
    """:class:`Partitions` that also give their whole exact aggregates."""

    def exact_aggregates(self, reporting_length: int) -> AggregateSet: ...


KEY_BLOCK = 1 << 20
"""Synthetic combinations turned from one key form into the other at a time."""
SLICE_ROWS = 1 << 18
"""Records of a table in this process summed at a time (:class:`RowSlices`): the sums are the
same integers whatever the slice, and the memory they take follows the slice, not the table."""


@dataclass(frozen=True, slots=True, eq=False)
class RowSlices:
    """A table in this process as a :class:`PartitionedTable` whose partitions are its slices of
    ``rows`` records (how :func:`evaluate_partitioned` sums local synthetic records: the
    partitions' one path, at the memory of one slice)."""

    table: PreparedTable
    rows: int = SLICE_ROWS

    def __post_init__(self) -> None:
        require(self.rows >= 1, f"a slice needs at least one record, got rows={self.rows!r}")

    @property
    def domain(self) -> Domain:
        """The table's domain."""
        return self.table.domain

    @property
    def n_records(self) -> int:
        """The table's record count."""
        return self.table.n_records

    def slices(self) -> Iterator[PreparedTable]:
        """The table's consecutive slices of ``rows`` records (views; one slice if it has none)."""
        t = self.table
        for start in range(0, max(t.n_records, 1), self.rows):
            codes = t.codes[start : start + self.rows]
            yield PreparedTable(t.domain, codes, t.multi_value_columns)

    def map_reduce(self, fn: Callable[..., T], combine: Callable[[T, T], T], /, **kwargs: Any) -> T:
        """``fn`` of every slice, combined in order."""
        return functools.reduce(combine, (fn(part, **kwargs) for part in self.slices()))

    def exact_aggregates(self, reporting_length: int) -> AggregateSet:
        """The table's exact aggregates."""
        return exact_aggregates(self.table, reporting_length)


def partition_risk(table: PreparedTable, lookups: RiskLookups) -> tuple[int, int]:
    """A partition's records holding a unique and a rare combination."""
    return record_risk_counts(table, lookups)


def add_pairs(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    """Element-wise sum of two count pairs."""
    return a[0] + b[0], a[1] + b[1]


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
    means = {o: float(np.mean(v)) for o, v in tvds.items()}
    maxes = {o: float(np.max(v)) for o, v in tvds.items()}
    counts = {o: len(v) for o, v in tvds.items()}
    return {
        "differentially_private": False,
        "note": NOT_DP_NOTE,
        "tvd_mean_by_order": means,
        "tvd_max_by_order": maxes,
        "n_marginals_by_order": counts,
        "empty_cell_share": {
            "original": float(np.mean(list(empty_o.values()))),
            "synthetic": float(np.mean(list(empty_s.values()))),
        },
        "empty_share_by_column": {
            c: {"original": empty_o[c], "synthetic": empty_s[c]} for c in domain.columns
        },
    }


def _counted(
    records: PreparedTable | Partitions, k: int, base: int
) -> tuple[NDArray[np.int64], NDArray[np.integer]]:
    """:func:`~sds_core.evaluation.agreement.length_keys` of records (counts >= 1: exact)."""
    keys, counts = length_keys(records, k, base)
    invariant(not bool((counts < 1).any()), "a count below 1 among the records' counts")
    return keys, counts


def _length_risk(
    k: int,
    keys: NDArray[np.int64],
    counts: NDArray[np.integer],
    base: int,
    resolution: int,
    n_columns: int,
) -> LengthRisk:
    """:func:`~sds_core.evaluation.metrics.length_risk` of one length's exact counts given as
    keys (no count is negative: the count-1 combinations are not looked up on their own)."""
    return length_risk(
        k,
        counts,
        lambda mask: _rows(keys, mask, base, k),
        resolution=resolution,
        n_columns=n_columns,
        with_unique=False,
    )


def compare_dp_by_length(
    sensitive: Partitions, dp_aggregates: AggregateSet, reporting_length: int, resolution: int
) -> tuple[dict[str, Any], RiskLookups]:
    """:func:`~sds_core.evaluation.metrics.aggregate_metrics` of the DP aggregates against the
    sensitive records' exact aggregates, and those aggregates'
    :func:`~sds_core.evaluation.metrics.risk_lookups`, the records counted one length at a
    time where they are (only one length's summed keys come here, each freed before the
    next; the whole exact aggregates never exist): the same numbers as from
    ``exact_aggregates(sensitive, R)``."""
    domain, R = sensitive.domain, reporting_length
    base = max(domain.n_attributes, 1)
    lengths = range(1, R + 1)
    top = max((int(dp_aggregates.counts_of(k).counts.max(initial=0)) for k in lengths), default=0)
    compared = AggregateComparison(domain, R, dp_aggregates.domain, resolution, top)
    risks = []
    for k in lengths:
        keys, counts = _counted(sensitive, k, base)
        risks.append(_length_risk(k, keys, counts, base, resolution, domain.n_columns))
        s_keys = _in_key_space(compared, keys, base, k, target=False)
        del keys
        t_cc = dp_aggregates.counts_of(k)
        compared.add_length(k, s_keys, counts, compared.target_keys(t_cc.attrs), t_cc.counts)
        del s_keys, counts
    return (
        compared.result(sensitive.n_records, dp_aggregates.protected_number_of_records),
        risk_lookups_of(resolution, risks),
    )


def compare_by_length(
    sensitive: Partitions,
    synthetic: PreparedTable | PartitionedTable,
    reporting_length: int,
    resolution: int,
) -> tuple[dict[str, Any], RiskLookups]:
    """:func:`~sds_core.evaluation.metrics.aggregate_metrics` of the records' exact aggregates
    against the sensitive records' and the synthetic ones'
    :func:`~sds_core.evaluation.metrics.risk_lookups`, both counted one length at a time
    (:func:`~sds_core.evaluation.agreement.length_keys`: sorted keys and narrow counts, each
    length freed before the next, no (m, k) rows but the lookups'; records in partitions are
    counted where they are and only one length's summed keys come here): the same numbers as
    from ``exact_aggregates`` of both.

    Length 1 goes first: no combination is more frequent than each of its attributes, so its
    largest count is every length's (the comparison's count bins need it up front).
    """
    if isinstance(synthetic, PreparedTable):
        require(
            synthetic.n_records > 0, "the table is empty: aggregation needs at least one record"
        )
    R, domain = reporting_length, synthetic.domain
    s_base, base = max(sensitive.domain.n_attributes, 1), max(domain.n_attributes, 1)
    compared: AggregateComparison | None = None
    risks: list[LengthRisk] = []
    for k in range(1, R + 1):
        keys, counts = _counted(synthetic, k, base)
        if compared is None:  # length 1: at most one combination per attribute
            top = int(counts.max(initial=0))
            compared = AggregateComparison(sensitive.domain, R, domain, resolution, top)
        # the sensitive length before the records' risk rows: its arrival (the received
        # frames and their aligned copy) meets one length's keys, not those rows too
        s_keys, s_counts = _counted(sensitive, k, s_base)
        s_keys = _in_key_space(compared, s_keys, s_base, k, target=False)
        risks.append(_length_risk(k, keys, counts, base, resolution, domain.n_columns))
        t_keys = _in_key_space(compared, keys, base, k, target=True)
        del keys
        compared.add_length(k, s_keys, s_counts, t_keys, counts)
        del s_keys, s_counts, t_keys, counts
    invariant(compared is not None, "no length compared")
    assert compared is not None  # for mypy: the invariant above
    return (
        compared.result(sensitive.n_records, synthetic.n_records),
        risk_lookups_of(resolution, risks),
    )


def _rows(
    keys: NDArray[np.int64], mask: NDArray[np.bool_], base: int, k: int
) -> NDArray[np.integer]:
    """The attribute rows of the masked :func:`~sds_core.marginals.aggregates.encode_keys`
    keys (ids below ``base``) in the smallest integer type, :data:`KEY_BLOCK` keys at a time."""
    dtype = np.int16 if base <= 1 << 15 else np.int32
    out = np.empty((int(mask.sum()), k), dtype=dtype)
    at = 0
    for start in range(0, keys.shape[0], KEY_BLOCK):
        block = keys[start : start + KEY_BLOCK][mask[start : start + KEY_BLOCK]]
        out[at : at + block.shape[0]] = decode_keys(block, base, k)
        at += block.shape[0]
    return out


def _in_key_space(
    compared: AggregateComparison, keys: NDArray[np.int64], base: int, k: int, *, target: bool
) -> NDArray[np.int64]:
    """Combinations given as :func:`~sds_core.marginals.aggregates.encode_keys` keys of radix
    ``base`` in the comparison's key space (:meth:`AggregateComparison.target_keys` or
    :meth:`AggregateComparison.sensitive_keys`): the same keys when the radix is the same and
    the ids are not mapped, else converted :data:`KEY_BLOCK` keys at a time."""
    if base == compared.base and (compared.t_map is None or not target):
        return keys
    convert = compared.target_keys if target else compared.sensitive_keys
    out = np.empty(keys.shape[0], dtype=np.int64)
    for start in range(0, keys.shape[0], KEY_BLOCK):
        out[start : start + KEY_BLOCK] = convert(
            decode_keys(keys[start : start + KEY_BLOCK], base, k)
        )
    return out


def evaluate_partitioned(
    sensitive: Partitions,
    synthetic: PreparedTable | PartitionedTable,
    dp_aggregates: AggregateSet,
    params: EvaluationParams = EvaluationParams(),
) -> dict[str, Any]:
    """:func:`~sds_core.evaluation.metrics.evaluate_release` of a sensitive table held in
    partitions (its domain, record count and ``map_reduce`` over them): the same dict. NOT
    differentially private (reads the sensitive data through its sums). Both sides are
    counted one combination length at a time where they are (their exact aggregates never
    exist whole here), synthetic records in partitions summed the same way (their risk
    counts and marginal cells too), never brought here.
    """
    R, k = params.reporting_length, params.resolution
    order = params.max_marginal_order
    domain, n_records = sensitive.domain, sensitive.n_records
    # one metric at a time, each one's lookups, keys and cells freed before the next
    vs_dp, lookups = compare_dp_by_length(sensitive, dp_aggregates, R, k)
    unique, rare = sensitive.map_reduce(partition_risk, add_pairs, lookups=lookups)
    sensitive_risk = risk_summary(lookups, n_records, unique, rare)
    del lookups
    parts = RowSlices(synthetic) if isinstance(synthetic, PreparedTable) else synthetic
    records = parts.table if isinstance(parts, RowSlices) else parts
    vs_synthetic, s_lookups = compare_by_length(sensitive, records, R, k)
    s_unique, s_rare = parts.map_reduce(partition_risk, add_pairs, lookups=s_lookups)
    synthetic_risk = risk_summary(s_lookups, parts.n_records, s_unique, s_rare)
    del s_lookups
    top = min(order, domain.n_columns)
    cards, mappings = fidelity_mappings(domain, parts.domain)
    cells = sensitive.map_reduce(partition_marginals, add_cells, cards=cards, max_order=top)
    synth_cells: Mapping[tuple[int, ...], tuple[NDArray[np.integer], NDArray[np.integer]]]
    if isinstance(parts, RowSlices):  # one marginal at a time, none summed over slices
        synth_cells = LocalCells(parts, mappings, cards, order)
    else:
        summed: Cells = parts.map_reduce(
            partition_fidelity_cells, add_cells, mappings=mappings, cards=cards, max_order=order
        )
        synth_cells = summed
    fidelity = fidelity_from_cells(
        domain, n_records, cells, synthetic.n_records, synth_cells, cards, order
    )
    return {
        "differentially_private": False,
        "note": NOT_DP_NOTE,
        "params": {"reporting_length": R, "resolution": k, "max_marginal_order": order},
        "sensitive_vs_dp_aggregates": vs_dp,
        "sensitive_vs_synthetic": vs_synthetic,
        "sensitive_risk": sensitive_risk,
        "synthetic_risk": synthetic_risk,
        "marginal_fidelity": fidelity,
    }
