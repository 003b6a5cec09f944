"""Aggregate sets: counts of k-tuples (combinations) of attributes, keyed by length.

A combination of length k is a row of k global attribute ids (see :class:`Domain`), ascending,
from k distinct columns. ``CombinationCounts`` holds all combinations of one length with their
counts, rows unique and sorted lexicographically; ``AggregateSet`` holds lengths 1..R and is
the object synthesis, evaluation and publishing read. ``is_dp`` says whether the counts are
differentially private (publishable) or exact (sensitive).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from sds_core.data.domain import Domain
from sds_core.errors import SdsInputError, invariant


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
    """

    domain: Domain
    reporting_length: int
    by_len: Mapping[int, CombinationCounts]
    protected_number_of_records: int | None = None
    is_dp: bool = False
    _text_cache: dict[str, int] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.reporting_length < 1:
            raise SdsInputError(f"reporting_length must be >= 1, got {self.reporting_length}")
        for k, cc in self.by_len.items():
            invariant(cc.length == k, f"by_len[{k}] holds combinations of length {cc.length}")

    def counts_of(self, k: int) -> CombinationCounts:
        """Combinations of length k (empty when none)."""
        return self.by_len.get(k, CombinationCounts.empty(k))

    def total_combinations(self) -> int:
        """Number of combinations over all lengths."""
        return sum(len(cc) for cc in self.by_len.values())

    def combination_text(self, row: NDArray[np.integer]) -> str:
        """SDS text form of one combination: ``Col:val;Col:val`` sorted byte-wise by text."""
        texts = self._attr_texts()
        return ";".join(sorted((texts[int(a)] for a in row), key=lambda s: s.encode()))

    def _attr_texts(self) -> tuple[str, ...]:
        return self.domain.attribute_texts()

    def to_text_dict(self) -> dict[str, int]:
        """``{"A:a1;B:b1": count}`` for every combination (the pac-synth dictionary form)."""
        texts = self._attr_texts()
        out: dict[str, int] = {}
        for k in sorted(self.by_len):
            cc = self.by_len[k]
            for row, c in zip(cc.attrs.tolist(), cc.counts.tolist(), strict=True):
                out[";".join(sorted((texts[a] for a in row), key=lambda s: s.encode()))] = int(c)
        return out

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

    def to_frame(self) -> pd.DataFrame:
        """One row per combination: ``length, combination, count`` + one column per domain column.

        The per-column cells hold the combination's value in that column, or null.
        """
        cols = self.domain.columns
        attr_col = self.domain.attribute_columns()
        offsets = np.asarray(self.domain.offsets[:-1])
        records: dict[str, list[Any]] = {"length": [], "combination": [], "count": []}
        per_col: dict[str, list[Any]] = {c: [] for c in cols}
        for k in sorted(self.by_len):
            cc = self.by_len[k]
            for row, c in zip(cc.attrs, cc.counts.tolist(), strict=True):
                records["length"].append(k)
                records["combination"].append(self.combination_text(row))
                records["count"].append(int(c))
                vals: list[str | None] = [None] * len(cols)
                for a in row.tolist():
                    ci = int(attr_col[a])
                    vals[ci] = self.domain.labels[ci][a - int(offsets[ci])]
                for name, v in zip(cols, vals, strict=True):
                    per_col[name].append(v)
        frame = pd.DataFrame(
            {
                "length": pd.array(records["length"], dtype="int64"),
                "combination": pd.array(records["combination"], dtype="string"),
                "count": pd.array(records["count"], dtype="int64"),
            }
        )
        for name in cols:
            frame[name] = pd.array(per_col[name], dtype="string")
        return frame
