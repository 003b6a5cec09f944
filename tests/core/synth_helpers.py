"""Small builders shared by the synthesizer tests (tables from columns of strings, PUMS)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from sds_core.data.domain import Domain
from sds_core.data.table import PreparedTable


def make_table(columns: Mapping[str, Sequence[str | None]]) -> PreparedTable:
    """Encode string columns (None = empty) with sorted labels, as the prepare stage does."""
    labels, codes = [], []
    for values in columns.values():
        labs = sorted({v for v in values if v is not None})
        index = {lab: i for i, lab in enumerate(labs)}
        labels.append(tuple(labs))
        codes.append([index[v] if v is not None else -1 for v in values])
    domain = Domain(tuple(columns), tuple(labels))
    return PreparedTable(domain, np.asarray(codes, dtype=np.int32).T.reshape(-1, len(columns)))


def pums_table(shared_data: Path, columns: Sequence[str] | None = None) -> PreparedTable:
    """PUMS.csv (1000 rows) with every column as text."""
    frame = pd.read_csv(shared_data / "pums" / "PUMS.csv", dtype=str)
    cols = list(columns) if columns is not None else list(frame.columns)
    return make_table({c: frame[c].tolist() for c in cols})


def column_frequencies(table: PreparedTable, column: str) -> dict[str | None, float]:
    """Share of records per label of ``column`` (None for empty)."""
    j = table.domain.column_index(column)
    labs = table.domain.labels[j]
    vals, counts = np.unique(table.codes[:, j], return_counts=True)
    n = max(table.n_records, 1)
    return {
        (labs[v] if v >= 0 else None): c / n
        for v, c in zip(vals.tolist(), counts.tolist(), strict=True)
    }
