"""Aggregate sets: counts of k-tuples (combinations) of attributes, keyed by length.

A combination of length k is a row of k global attribute ids (see :class:`Domain`), ascending,
from k distinct columns. ``CombinationCounts`` holds all combinations of one length with their
counts, rows unique and sorted lexicographically; ``AggregateSet`` holds lengths 1..R and is
the object synthesis, evaluation and publishing read. ``is_dp`` says whether the counts are
differentially private (publishable) or exact (sensitive).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from sds_core.data.domain import Domain
from sds_core.errors import SdsInputError, invariant, require


def encode_keys(attrs: NDArray[np.integer], base: int) -> NDArray[np.int64]:
    """Mixed-radix int64 key of each combination row (order-preserving for sorted rows).

    Raises SdsInputError when ``base ** k`` does not fit in int64.

    >>> encode_keys(np.array([[0, 2], [1, 2]]), 3).tolist()
    [2, 5]
    """
    k = attrs.shape[1] if attrs.ndim == 2 else 0
    if base > 1 and k * np.log2(float(base)) >= 62.5:
        raise SdsInputError(
            f"too many attributes ({base}) for combinations of length {k}: keys overflow int64; "
            "reduce the reporting length or bin/merge high-cardinality columns"
        )
    keys = np.zeros(attrs.shape[0], dtype=np.int64)
    for j in range(k):
        keys = keys * base + attrs[:, j].astype(np.int64)
    return keys


def decode_keys(keys: NDArray[np.int64], base: int, length: int) -> NDArray[np.int32]:
    """Inverse of :func:`encode_keys`."""
    out = np.empty((keys.shape[0], length), dtype=np.int32)
    rest = keys.copy()
    for j in range(length - 1, -1, -1):
        out[:, j] = rest % base
        rest //= base
    return out


@dataclass(frozen=True, slots=True, eq=False)
class CombinationCounts:
    """All reported combinations of one length ``k``: ``attrs`` (m, k) and ``counts`` (m,)."""

    attrs: NDArray[np.int32]
    counts: NDArray[np.int64]

    def __post_init__(self) -> None:
        invariant(self.attrs.ndim == 2, f"attrs must be 2-d, got shape {self.attrs.shape}")
        invariant(
            self.attrs.shape[0] == self.counts.shape[0],
            f"{self.attrs.shape[0]} combinations but {self.counts.shape[0]} counts",
        )

    @property
    def length(self) -> int:
        """The combination length k."""
        return int(self.attrs.shape[1])

    def __len__(self) -> int:
        return int(self.attrs.shape[0])

    @classmethod
    def empty(cls, length: int) -> CombinationCounts:
        """No combinations of this length."""
        return cls(np.zeros((0, length), dtype=np.int32), np.zeros(0, dtype=np.int64))

    @classmethod
    def from_unsorted(
        cls, attrs: NDArray[np.integer], counts: NDArray[np.integer]
    ) -> CombinationCounts:
        """Sort rows lexicographically (rows themselves must already be ascending)."""
        if attrs.shape[0] == 0:
            return cls(attrs.astype(np.int32).reshape(0, attrs.shape[1]), counts.astype(np.int64))
        order = np.lexsort(attrs.T[::-1])
        return cls(
            np.ascontiguousarray(attrs[order], dtype=np.int32), counts[order].astype(np.int64)
        )


@dataclass(frozen=True, eq=False)
class AggregateSet:
    """Counts of combinations of lengths 1..reporting_length.

    Args:
        domain: the domain the attribute ids refer to.
        reporting_length: R, the longest combination length.
        by_len: ``{k: CombinationCounts}`` for k = 1..R (missing lengths mean none).
        protected_number_of_records: the DP record count (None for exact aggregates).
        is_dp: True when every count is differentially private (safe to publish).
        domain_released: True when every label of ``domain`` is itself a DP release: ``mst``
            and ``aim`` keep a value only when its noisy 1-way count reached the release
            threshold, and their records may hold any kept value, even one the published
            counts do not list (``aim`` publishes a 1-way marginal it measured again from its
            rounds' measurements, whose rounded cells may be <= 0). False for SDS aggregates,
            whose domain also holds values found in the data and suppressed.
    """

    domain: Domain
    reporting_length: int
    by_len: Mapping[int, CombinationCounts]
    protected_number_of_records: int | None = None
    is_dp: bool = False
    domain_released: bool = False
    _text_cache: dict[str, int] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.reporting_length < 1:
            raise SdsInputError(f"reporting_length must be >= 1, got {self.reporting_length}")
        for k, cc in self.by_len.items():
            invariant(cc.length == k, f"by_len[{k}] holds combinations of length {cc.length}")

    def counts_of(self, k: int) -> CombinationCounts:
        """Combinations of length k (empty when none)."""
        return self.by_len.get(k, CombinationCounts.empty(k))

    def one_way_labels(self) -> dict[str, tuple[str, ...]]:
        """Each column's labels that the length-1 combinations report (domain order).

        Of DP aggregates, these are the values a release publishes; the domain itself may hold
        more (values found in the data whose 1-way count was suppressed), which must never be
        published, not even as a number of values.

        >>> d = Domain(("A", "B"), (("a1", "a2", "hidden"), ("b1",)))
        >>> AggregateSet.from_text_dict(d, {"A:a2": 4, "A:a1": 5}, 1).one_way_labels()
        {'A': ('a1', 'a2'), 'B': ()}
        """
        attrs = self.counts_of(1).attrs[:, 0].tolist()
        offsets, out = self.domain.offsets, {}
        for c, (name, labels) in enumerate(
            zip(self.domain.columns, self.domain.labels, strict=True)
        ):
            lo, hi = offsets[c], offsets[c + 1]
            out[name] = tuple(labels[a - lo] for a in attrs if lo <= a < hi)
        return out

    def released_labels(self) -> dict[str, tuple[str, ...]]:
        """Each column's labels that the release has made public: the whole domain's when
        it is a DP release itself (``domain_released``), else :meth:`one_way_labels`.

        >>> d = Domain(("A",), (("a1", "a2"),))
        >>> AggregateSet.from_text_dict(d, {"A:a1": 5}, 1).released_labels()
        {'A': ('a1',)}
        >>> AggregateSet(d, 1, {}, domain_released=True).released_labels()
        {'A': ('a1', 'a2')}
        """
        if self.domain_released:
            return dict(zip(self.domain.columns, self.domain.labels, strict=True))
        return self.one_way_labels()

    def total_combinations(self) -> int:
        """Number of combinations over all lengths."""
        return sum(len(cc) for cc in self.by_len.values())

    def combination_text(self, row: NDArray[np.integer]) -> str:
        """SDS text form of one combination: ``Col:val;Col:val`` sorted byte-wise by text."""
        texts = self._attr_texts()
        return ";".join(sorted((texts[int(a)] for a in row), key=lambda s: s.encode()))

    def _attr_texts(self) -> tuple[str, ...]:
        """``Column:value`` of every attribute id, built once per aggregate set."""
        cached = self.__dict__.get("_attr_texts_cache")
        if cached is None:
            cached = self.domain.attribute_texts()
            object.__setattr__(self, "_attr_texts_cache", cached)
        return cached

    def to_text_dict(self) -> dict[str, int]:
        """``{"A:a1;B:b1": count}`` for every combination (the pac-synth dictionary form)."""
        table = self.to_arrow()
        return dict(
            zip(
                table.column("combination").to_pylist(),
                table.column("count").to_pylist(),
                strict=True,
            )
        )

    @classmethod
    def from_text_dict(
        cls,
        domain: Domain,
        counts: Mapping[str, int],
        reporting_length: int,
        *,
        protected_number_of_records: int | None = None,
        is_dp: bool = False,
    ) -> AggregateSet:
        """Build from ``{"A:a1;B:b1": count}`` (unknown attributes raise SdsInputError)."""
        index = {t: i for i, t in enumerate(domain.attribute_texts())}
        rows: dict[int, list[list[int]]] = {}
        vals: dict[int, list[int]] = {}
        for key, c in counts.items():
            parts = key.split(";")
            try:
                ids = sorted(index[p] for p in parts)
            except KeyError as e:
                raise SdsInputError(f"combination {key!r} names an unknown attribute {e}") from None
            rows.setdefault(len(ids), []).append(ids)
            vals.setdefault(len(ids), []).append(int(c))
        by_len = {
            k: CombinationCounts.from_unsorted(
                np.asarray(rows[k], dtype=np.int32).reshape(-1, k), np.asarray(vals[k])
            )
            for k in rows
        }
        return cls(domain, reporting_length, by_len, protected_number_of_records, is_dp)

    def to_arrow(self) -> pa.Table:
        """One row per combination, lengths ascending, each length in its stored order.

        Columns: ``length`` (int64), ``combination`` (the SDS text form, attributes sorted
        byte-wise), ``count`` (int64), then one string column per domain column holding the
        combination's value in that column, or null. Built with Arrow kernels from one text
        table indexed by attribute id, so it takes time linear in the number of combinations.
        """
        return combination_table(self.domain, [self.counts_of(k) for k in sorted(self.by_len)])

    def to_arrow_batches(self, rows: int) -> Iterator[pa.Table]:
        """:meth:`to_arrow` as consecutive tables of ``rows`` rows (the last one shorter; one
        empty table when there is no combination), each built alone: the whole table is never
        held at once (publish streams ``aggregates.parquet`` from them)."""
        require(rows > 0, f"rows must be positive, got {rows}")
        blocks = [self.counts_of(k) for k in sorted(self.by_len)]
        total = sum(len(b) for b in blocks)
        for lo in range(0, max(total, 1), rows):
            yield combination_table(self.domain, row_range(blocks, lo, lo + rows))

    def to_frame(self) -> pd.DataFrame:
        """:meth:`to_arrow` as a DataFrame (``string`` columns, nulls where a column is absent)."""
        return combination_frame(self.to_arrow())


def combination_frame(table: pa.Table) -> pd.DataFrame:
    """A :func:`combination_table` as pandas: int64 and ``string`` columns, no copy of texts."""
    data: dict[str, object] = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        if pa.types.is_large_string(column.type):
            data[name] = pd.arrays.ArrowStringArray(column)
        else:
            data[name] = pd.array(column.to_numpy(), dtype="int64")
    return pd.DataFrame(data)


def _byte_ranks(texts: tuple[str, ...]) -> NDArray[np.int64]:
    """Rank of each text in byte-wise (UTF-8) order, the order of a combination's attributes."""
    order = sorted(range(len(texts)), key=lambda i: texts[i].encode())
    rank = np.empty(len(texts), dtype=np.int64)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(len(texts), dtype=np.int64)
    return rank


def _sorted_ranks(attrs: NDArray[np.integer], rank: NDArray[np.int64]) -> NDArray[np.integer]:
    """Each row's attribute ranks (``rank[attrs]``), ascending along the row: the order the
    attributes' texts take in the combination's text. int32 when the ranks fit (they are
    0..n-1 for n attributes), sorted in place: one (m, k) array, no argsort or gather copies."""
    small = rank.shape[0] <= np.iinfo(np.int32).max
    ranks: NDArray[np.integer] = (rank.astype(np.int32) if small else rank)[attrs]
    ranks.sort(axis=1)
    return ranks


def _by_rank(rank: NDArray[np.int64]) -> NDArray[np.int64]:
    """The attribute id of each rank (``rank`` is a permutation of 0..n-1)."""
    out = np.empty_like(rank)
    out[rank] = np.arange(rank.shape[0], dtype=np.int64)
    return out


def _in_text_order(attrs: NDArray[np.integer], rank: NDArray[np.int64]) -> NDArray[np.int64]:
    """Each row's attribute ids in the order their texts take in the combination's text."""
    by_rank: NDArray[np.int64] = _by_rank(rank)[_sorted_ranks(attrs, rank)]
    return by_rank


def text_order(domain: Domain, block: CombinationCounts) -> NDArray[np.integer] | None:
    """Integer sort keys, one row per combination, ordered like the combinations' texts.

    Returns a (k, m) array for ``np.lexsort`` (last row = primary key) whose order is the
    byte order of the texts ``Col:val;Col:val``, or None when some attribute text contains
    ``;`` (impossible after SDS normalization, which escapes it). Why it holds: with no ``;``
    inside a text, ``a;...`` and ``b;...`` compare as ``a;`` and ``b;`` do, and neither of two
    different ``x;`` is a prefix of the other; so all positions but the last compare by the
    rank of ``text + ";"``, the last by the rank of ``text``.
    """
    texts = domain.attribute_texts()
    if any(";" in t for t in texts):
        return None
    rank, rank_joined = _byte_ranks(texts), _byte_ranks(tuple(t + ";" for t in texts))
    k = block.length
    if k == 0:
        return np.zeros((0, len(block)), dtype=np.int64)
    # the rows' ranks sorted in place, then each position's key looked up by rank (the text of
    # the attribute with rank r joined with ";" has rank joined_of[r]): (m, k) and (k, m)
    # arrays of int32 at most, where gathering attribute ids first made six of int64
    ranks = _sorted_ranks(block.attrs, rank)
    joined_of = rank_joined[_by_rank(rank)].astype(ranks.dtype)
    keys = np.empty((k, len(block)), dtype=ranks.dtype)
    keys[0] = ranks[:, k - 1]  # the last text compares by its own rank (lexsort: last row first)
    for j in range(k - 1):
        keys[k - 1 - j] = joined_of[ranks[:, j]]
    return keys


def count_text_order(domain: Domain, block: CombinationCounts) -> NDArray[np.intp] | None:
    """Row order of one length's combinations: count descending, then the text byte-wise (the
    order of ``aggregates.tsv``), or None when :func:`text_order` has no integer keys.

    When the count's range and the ``k`` text ranks fit in 63 bits together, each combination
    gets ONE packed int64 key (count, then the ranks :func:`text_order` gives, most significant
    first) and the keys are argsorted: 16 bytes per combination where ``np.lexsort`` over the
    (k, m) keys and the counts held about 40 (10M combinations of length 3: ~160 MB instead of
    ~320). Keys are unique (a length's combinations are), so any sort gives this one order.
    Otherwise ``np.lexsort`` over :func:`text_order`'s keys, the same order.

    >>> d = Domain(("A", "B"), (("x", "y"), ("z",)))
    >>> b = CombinationCounts(np.array([[0], [1], [2]], np.int32), np.array([5, 7, 5]))
    >>> count_text_order(d, b).tolist()
    [1, 0, 2]
    """
    texts = domain.attribute_texts()
    if any(";" in t for t in texts):
        return None
    k, m = block.length, len(block)
    if m == 0:
        return np.zeros(0, dtype=np.intp)
    counts = block.counts
    lo, hi = int(counts.min()), int(counts.max())
    bits = max(1, (len(texts) - 1).bit_length())
    if k == 0 or k * bits + max(1, (hi - lo).bit_length()) > 63:
        keys = text_order(domain, block)
        invariant(keys is not None, "text_order refused texts count_text_order accepted")
        order: NDArray[np.intp] = np.lexsort((*keys, -counts))  # type: ignore[misc]
        return order
    rank, rank_joined = _byte_ranks(texts), _byte_ranks(tuple(t + ";" for t in texts))
    joined_of = rank_joined[_by_rank(rank)]
    from sds_core.marginals._kernels import packed_count_text_keys  # numba: not at import

    packed = packed_count_text_keys(block.attrs, counts, rank, joined_of, hi, bits)
    order = np.argsort(packed)
    return order


def row_range(blocks: list[CombinationCounts], lo: int, hi: int) -> list[CombinationCounts]:
    """Rows ``lo..hi-1`` of the blocks read one after the other, as blocks (views).

    >>> b = [CombinationCounts(np.zeros((2, 1), np.int32), np.array([5, 6])),
    ...      CombinationCounts(np.zeros((3, 2), np.int32), np.array([1, 2, 3]))]
    >>> [c.counts.tolist() for c in row_range(b, 1, 4)]
    [[6], [1, 2]]
    """
    out, start = [], 0
    for block in blocks:
        a, b = max(lo - start, 0), min(hi - start, len(block))
        if a < b:
            out.append(CombinationCounts(block.attrs[a:b], block.counts[a:b]))
        start += len(block)
    return out


def combination_texts(domain: Domain, block: CombinationCounts) -> pa.Array:
    """The SDS text ``Col:val;Col:val`` of each of ``block``'s combinations (attributes in
    byte order of their texts), as :meth:`AggregateSet.to_arrow`'s ``combination`` column."""
    texts = domain.attribute_texts()
    return _joined_texts(pa.array(texts, type=pa.large_string()), _byte_ranks(texts), block)


def _joined_texts(text_array: pa.Array, rank: NDArray[np.int64], block: CombinationCounts) -> Any:
    by_text = _in_text_order(block.attrs, rank)
    parts = [text_array.take(pa.array(by_text[:, j])) for j in range(block.length)]
    if block.length == 1:
        return parts[0]
    return pc.binary_join_element_wise(*parts, pa.scalar(";", pa.large_string()))


TABLE_COLUMNS = ("length", "combination", "count")
"""The aggregate table's own columns (before one column per input column)."""


def combination_table(domain: Domain, blocks: list[CombinationCounts]) -> pa.Table:
    """The rows of :meth:`AggregateSet.to_arrow` for ``blocks`` (one per length, in order).

    Each text is built once per attribute (``texts``); a combination's text is the join of its
    attributes' texts, taken in byte order of the texts; a column cell is the label of the
    combination's attribute in that column. Everything is a numpy gather or an Arrow kernel.
    """
    clash = sorted(set(domain.columns) & set(TABLE_COLUMNS))
    if clash:
        raise SdsInputError(
            f"input column(s) {clash} have the names of the aggregate table's own columns "
            f"{list(TABLE_COLUMNS)}, next to which every input column gets a column of its "
            "values: rename them in the input or leave them out (use_columns)"
        )
    texts = domain.attribute_texts()
    text_array = pa.array(texts, type=pa.large_string())
    rank = _byte_ranks(texts)
    attr_col = domain.attribute_columns()
    offsets = np.asarray(domain.offsets[:-1], dtype=np.int64)
    total = sum(len(b) for b in blocks)
    lengths = np.empty(total, dtype=np.int64)
    counts = np.empty(total, dtype=np.int64)
    cells = np.full((domain.n_columns, total), -1, dtype=np.int32)  # label code; -1 = absent
    combos: list[pa.Array] = []
    start = 0
    for block in blocks:
        m, k = len(block), block.length
        rows = np.arange(start, start + m)
        lengths[rows], counts[rows] = k, block.counts
        if m and k:
            attrs = block.attrs.astype(np.int64)
            combos.append(_joined_texts(text_array, rank, block))
            for j in range(k):  # each attribute lands in its own column
                cols = attr_col[attrs[:, j]]
                cells[cols, rows] = attrs[:, j] - offsets[cols]
        start += m
    columns: dict[str, pa.Array] = {
        "length": pa.array(lengths, type=pa.int64()),
        "combination": pa.concat_arrays(combos) if combos else pa.array([], pa.large_string()),
        "count": pa.array(counts, type=pa.int64()),
    }
    for c, (name, labels) in enumerate(zip(domain.columns, domain.labels, strict=True)):
        absent = cells[c] < 0
        columns[name] = pa.array(labels, type=pa.large_string()).take(
            pa.array(np.where(absent, 0, cells[c]), mask=absent)
        )
    return pa.table(columns)
