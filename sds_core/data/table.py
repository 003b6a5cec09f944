"""PreparedTable: the sensitive table after SDS preprocessing, as integer codes.

Produced by :mod:`sds_core.data.preparation` and consumed by exact/DP aggregation and evaluation.
One row per privacy unit (a record, or a subject after subject-id joining). It is
sensitive: it must never reach a release artifact, a log or Prefect result storage.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from sds_core.data.domain import EMPTY_CODE, Domain
from sds_core.errors import SdsInputError


@dataclass(frozen=True, slots=True)
class MultiValueColumn:
    """How a multi-value source column was expanded into binary columns.

    Args:
        source: the original (escaped) column name.
        delimiter: the delimiter its cells were split on.
        binary_columns: the ``<source>_<value>`` column names, sorted.
        values: the value each binary column stands for (same order).
    """

    source: str
    delimiter: str
    binary_columns: tuple[str, ...]
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True, eq=False)
class PreparedTable:
    """Encoded records: ``codes[j, c]`` is the code of record j in column c, -1 if empty.

    >>> d = Domain(("A", "B"), (("a1", "a2"), ("b1",)))
    >>> t = PreparedTable(d, np.array([[0, -1], [1, 0]], dtype=np.int32))
    >>> t.n_records, t.attribute_ids()[1].tolist()
    (2, [1, 2])
    """

    domain: Domain
    codes: NDArray[np.int32]
    multi_value_columns: tuple[MultiValueColumn, ...] = ()

    def __post_init__(self) -> None:
        codes = self.codes
        if codes.ndim != 2 or codes.shape[1] != self.domain.n_columns:
            raise SdsInputError(
                f"codes must have shape (n_records, {self.domain.n_columns}), got {codes.shape}"
            )
        if codes.size:
            card = np.asarray(self.domain.cardinalities, dtype=np.int64)
            if (codes < EMPTY_CODE).any() or (codes >= card[None, :]).any():
                raise SdsInputError(
                    "codes out of range for the domain (allowed: -1..cardinality-1)"
                )

    @property
    def n_records(self) -> int:
        """Number of records (sensitive: never release this value)."""
        return int(self.codes.shape[0])

    def attribute_ids(self) -> list[NDArray[np.int64]]:
        """Global attribute ids of each record (ascending), a list of arrays (slow path, tests)."""
        offsets = np.asarray(self.domain.offsets[:-1], dtype=np.int64)
        out = []
        for row in self.codes:
            mask = row >= 0
            out.append(row[mask].astype(np.int64) + offsets[mask])
        return out
