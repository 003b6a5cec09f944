"""Domain: the frozen value object describing the encoded columns of a prepared table.

Every column has a tuple of sorted, non-empty labels; a value's code is its index in that
tuple and ``-1`` means "empty" (no attribute). Attributes (column, value) also have a
global id: ``offsets[column] + code``, so ascending global ids follow column order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from sds_core.errors import SdsInputError

EMPTY_CODE = -1
"""Code used in a codes matrix for an empty cell (the record has no attribute there)."""


@dataclass(frozen=True, slots=True)
class Domain:
    """Ordered columns and the sorted labels of each column.

    Args:
        columns: column names in table order (already trimmed and escaped).
        labels: for each column, its distinct non-empty values, sorted, no duplicates.

    >>> d = Domain(("A", "B"), (("a1", "a2"), ("b1",)))
    >>> d.cardinalities
    (2, 1)
    >>> d.n_attributes, d.attribute_text(2)
    (3, 'B:b1')
    >>> Domain.from_json(d.to_json()) == d
    True
    """

    columns: tuple[str, ...]
    labels: tuple[tuple[str, ...], ...]
    _offsets: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.columns) != len(self.labels):
            raise SdsInputError(
                f"Domain needs one label tuple per column: {len(self.columns)} columns, "
                f"{len(self.labels)} label tuples"
            )
        if len(set(self.columns)) != len(self.columns):
            dup = sorted({c for c in self.columns if self.columns.count(c) > 1})
            raise SdsInputError(f"Domain column names must be unique; duplicated: {dup}")
        for col, labs in zip(self.columns, self.labels, strict=True):
            if list(labs) != sorted(set(labs)):
                raise SdsInputError(
                    f"Domain labels of column {col!r} must be sorted and unique, "
                    f"got {list(labs)[:10]}"
                )
            if "" in labs:
                raise SdsInputError(f"Domain labels of column {col!r} contain the empty string")
        offsets = [0]
        for labs in self.labels:
            offsets.append(offsets[-1] + len(labs))
        object.__setattr__(self, "_offsets", tuple(offsets))

    @property
    def cardinalities(self) -> tuple[int, ...]:
        """Number of non-empty values per column."""
        return tuple(len(labs) for labs in self.labels)

    @property
    def offsets(self) -> tuple[int, ...]:
        """Global attribute id of each column's first value (len = n_columns + 1)."""
        return self._offsets

    @property
    def n_columns(self) -> int:
        """Number of columns."""
        return len(self.columns)

    @property
    def n_attributes(self) -> int:
        """Number of (column, non-empty value) attributes."""
        return self._offsets[-1]

    def column_index(self, name: str) -> int:
        """Index of column ``name``; raises SdsInputError naming the known columns."""
        try:
            return self.columns.index(name)
        except ValueError:
            raise SdsInputError(
                f"unknown column {name!r}; known columns: {list(self.columns)}"
            ) from None

    def attribute_columns(self) -> NDArray[np.int32]:
        """Column index of every global attribute id (length ``n_attributes``)."""
        return np.repeat(np.arange(self.n_columns, dtype=np.int32), self.cardinalities)

    def attribute_text(self, attr: int) -> str:
        """SDS text form ``Column:value`` of a global attribute id."""
        col = int(np.searchsorted(self._offsets, attr, side="right") - 1)
        return f"{self.columns[col]}:{self.labels[col][attr - self._offsets[col]]}"

    def attribute_texts(self) -> tuple[str, ...]:
        """``Column:value`` for every global attribute id, in id order."""
        return tuple(
            f"{col}:{lab}"
            for col, labs in zip(self.columns, self.labels, strict=True)
            for lab in labs
        )

    def project(self, columns: Sequence[str]) -> Domain:
        """The sub-domain of ``columns`` (kept in this domain's column order)."""
        idx = sorted(self.column_index(c) for c in columns)
        return Domain(tuple(self.columns[i] for i in idx), tuple(self.labels[i] for i in idx))

    def to_json(self) -> str:
        """JSON text of the domain (columns and labels)."""
        return json.dumps({"columns": list(self.columns), "labels": [list(x) for x in self.labels]})

    @classmethod
    def from_json(cls, text: str) -> Domain:
        """Inverse of :meth:`to_json`."""
        obj = json.loads(text)
        return cls(tuple(obj["columns"]), tuple(tuple(x) for x in obj["labels"]))
