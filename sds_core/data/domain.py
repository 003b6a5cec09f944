"""Domain: the frozen value object describing the encoded columns of a prepared table; and
DeclaredDomain, one column's domain as a custodian declares it before the data is seen.

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


DEFAULT_LABEL_PREFIX = "unseen-"
"""Prefix of the labels :class:`DeclaredDomain` generates for values it does not list."""


@dataclass(frozen=True, slots=True)
class DeclaredDomain:
    """The global domain of one column, declared without looking at the data.

    Args:
        column: the column name.
        values: explicit values (indices 0..len-1), unique, non-empty strings.
        size: total domain size; the ``size - len(values)`` values not listed are labelled
            ``label_prefix`` + a zero-padded index (e.g. ``unseen-0042``). At least one of
            ``values`` and ``size`` is required; a data value is declared iff it is listed or
            equals one of the generated labels.
        label_prefix: prefix of generated labels (pick one no real value starts with).

    >>> d = DeclaredDomain("sex", values=("F", "M"), size=102)
    >>> d.total_size, d.label(1), d.label(101)
    (102, 'M', 'unseen-99')
    >>> d.index_of(["M", "unseen-03", "X"]).tolist()
    [1, 5, -1]
    """

    column: str
    values: tuple[str, ...] | None = None
    size: int | None = None
    label_prefix: str = DEFAULT_LABEL_PREFIX
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column:
            raise SdsInputError(
                f"DeclaredDomain.column must be a non-empty string, got {self.column!r}"
            )
        if self.values is None and self.size is None:
            raise SdsInputError(
                f"declared domain of column {self.column!r} needs values=[...] and/or size=N"
            )
        vals = tuple(self.values or ())
        if isinstance(self.values, str):
            raise SdsInputError(f"declared values of {self.column!r} must be a list, not a string")
        bad = [v for v in vals if not isinstance(v, str) or v == ""]
        if bad or len(set(vals)) != len(vals):
            raise SdsInputError(
                f"declared values of column {self.column!r} must be unique non-empty strings"
            )
        if self.size is not None and (
            isinstance(self.size, bool)
            or not isinstance(self.size, int)
            or self.size < max(len(vals), 1)
        ):
            raise SdsInputError(
                f"declared size of column {self.column!r} must be an integer >= the number of "
                f"listed values ({len(vals)}) and >= 1, got {self.size!r}"
            )
        if self.size is not None and self.size > len(vals) and not self.label_prefix:
            raise SdsInputError(f"label_prefix of column {self.column!r} must not be empty")
        object.__setattr__(self, "values", vals)
        object.__setattr__(self, "_index", {v: i for i, v in enumerate(vals)})

    @property
    def total_size(self) -> int:
        """Number of declared values N."""
        return self.size if self.size is not None else len(self.values or ())

    @property
    def n_generated(self) -> int:
        """Number of values known only by a generated label."""
        return self.total_size - len(self.values or ())

    def _width(self) -> int:
        return len(str(max(self.n_generated - 1, 0)))

    def label(self, index: int) -> str:
        """Label of declared value ``index`` (0 <= index < N)."""
        n_listed = len(self.values or ())
        if index < n_listed:
            return (self.values or ())[index]
        return f"{self.label_prefix}{index - n_listed:0{self._width()}d}"

    def index_of(self, labels: Sequence[str]) -> NDArray[np.int64]:
        """Declared index of each label, -1 for values outside the declared domain."""
        out = np.full(len(labels), -1, dtype=np.int64)
        n_listed, width, pre = len(self.values or ()), self._width(), self.label_prefix
        for i, lab in enumerate(labels):
            j = self._index.get(lab)
            if j is None and self.n_generated and lab.startswith(pre):
                tail = lab[len(pre) :]
                if len(tail) == width and tail.isdigit() and int(tail) < self.n_generated:
                    j = n_listed + int(tail)
            if j is not None:
                out[i] = j
        return out
