"""Input adapters of :func:`sds_core.data.preparation.prepare`: tables in, factorized text columns
out.

Accepts a pandas DataFrame, a pyarrow Table or pac-synth style raw rows (row 0 = headers) and
exposes each column as integer codes into its distinct cell texts, so every later rule of the
SDS preprocessing runs once per distinct value instead of once per cell.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from sds_core.errors import SdsInputError, invariant

TableLike: TypeAlias = pd.DataFrame | pa.Table | Sequence[Sequence[str]]


@dataclass(frozen=True, slots=True, eq=False)
class RawColumn:
    """One input column: ``texts[codes[j]]`` is row j's cell text, ``codes[j] == -1`` if missing."""

    codes: NDArray[np.int64]
    texts: list[str]


def cell_text(value: Any) -> str:
    """Text of one non-missing cell of a typed (DataFrame/Arrow) column.

    Strings are kept as they are; booleans give ``"True"``/``"False"``; integers and
    integer-valued floats give digits without ``.0`` (``60100.0`` -> ``"60100"``, unlike
    pac-synth's ``astype(str)``); other floats give Python's shortest round-trip ``repr``
    (``0.1`` -> ``"0.1"``, ``inf`` -> ``"inf"``); anything else gives ``str(value)``.

    >>> [cell_text(v) for v in ("a", 3, 60100.0, 0.25, True, np.int64(7))]
    ['a', '3', '60100', '0.25', 'True', '7']
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        f = float(value)
        return str(int(f)) if math.isfinite(f) and f.is_integer() else repr(f)
    return str(value)


def _factorize(values: Any) -> RawColumn:
    """Factorize a 1-D array-like; missing values (None, NaN, NA) get code -1."""
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    dtype = getattr(uniques, "dtype", None)
    if isinstance(dtype, np.dtype) and dtype.kind in "iu":
        texts = np.asarray(uniques).astype(str).tolist()  # same digits as str(int)
    elif isinstance(dtype, pd.StringDtype):
        texts = np.asarray(uniques, dtype=object).tolist()
    else:
        texts = [cell_text(u) for u in np.asarray(uniques, dtype=object).tolist()]
    return RawColumn(np.asarray(codes, dtype=np.int64), texts)


class TableSource:
    """Headers, row count and lazily factorized columns of one input table.

    Args:
        data: a DataFrame, an Arrow table, or raw rows whose row 0 holds the headers.
        record_limit: keep only the first ``record_limit`` data rows (None = all).

    Raises:
        SdsInputError: no header row, ragged raw rows (naming the row), no data rows, no columns.
    """

    def __init__(self, data: TableLike, record_limit: int | None) -> None:
        self._frame: pd.DataFrame | None = None
        self._arrow: pa.Table | None = None
        self._cells: NDArray[np.object_] | None = None
        self._columns: dict[int, RawColumn] = {}
        if isinstance(data, pd.DataFrame):
            self._frame = data if record_limit is None else data.iloc[:record_limit]
            self.headers = [cell_text(c) for c in data.columns]
            self.n_rows = len(self._frame)
        elif isinstance(data, pa.Table):
            self._arrow = data if record_limit is None else data.slice(0, record_limit)
            self.headers = list(data.column_names)
            self.n_rows = self._arrow.num_rows
        elif isinstance(data, Sequence) and not isinstance(data, str | bytes):
            self._init_raw(data, record_limit)
        else:
            raise SdsInputError(
                f"data must be a pandas DataFrame, a pyarrow Table or raw rows (row 0 = headers), "
                f"got {type(data).__name__}"
            )
        if not self.headers:
            raise SdsInputError("data has no columns: give at least one column")
        if self.n_rows == 0:
            raise SdsInputError("data has no rows: give at least one data row (after record_limit)")

    def _init_raw(self, rows: Sequence[Sequence[str]], record_limit: int | None) -> None:
        if len(rows) == 0:
            raise SdsInputError("raw data is empty: row 0 must hold the headers")
        self.headers = [cell_text(h) for h in rows[0]]
        width = len(self.headers)
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        bad = np.flatnonzero(lengths != width)
        if bad.size:
            i = int(bad[0])
            raise SdsInputError(
                f"raw data row {i} has {int(lengths[i])} cells but the header row has {width}: "
                "every row must have one cell per header (row 0 = headers)"
            )
        body = rows[1:] if record_limit is None else rows[1 : 1 + record_limit]
        self.n_rows = len(body)
        cells = np.empty((self.n_rows, width), dtype=object)
        if self.n_rows and width:
            cells[:] = [list(r) for r in body]
        self._cells = cells

    def column(self, i: int) -> RawColumn:
        """Factorized column ``i`` (cells as texts, missing cells as code -1); cached."""
        if i not in self._columns:
            if self._frame is not None:
                self._columns[i] = _factorize(self._frame.iloc[:, i])
            elif self._arrow is not None:
                self._columns[i] = _arrow_column(self._arrow.column(i))
            else:
                invariant(self._cells is not None, "raw cells missing")
                self._columns[i] = _factorize(self._cells[:, i])  # type: ignore[index]
        return self._columns[i]


def _arrow_column(col: pa.ChunkedArray) -> RawColumn:
    """Factorize an Arrow column: strings through dictionary encoding, others through pandas."""
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        enc = arr.dictionary_encode()
        codes = pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False)
        return RawColumn(codes.astype(np.int64), enc.dictionary.to_pylist())
    return _factorize(col.to_pandas())
