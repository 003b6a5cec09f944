"""The SDS zero rule seen from the input: which columns hold "0" cells that preparation empties.

SDS treats a cell holding ``0`` (after trimming) as an empty cell unless its column is listed in
``sensitive_zeros`` (spec sds-method §3.3, :mod:`sds_core.data.preparation`). On a table coded
with 0/1 flags that silently drops every zero; :func:`zero_shares` finds those columns before
anything is prepared, so the pipeline can warn. Its shares come from the sensitive table: they
are for the data custodian, never for a release.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from sds_core.data.text import WHITESPACE, match_key

__all__ = ["ALL_COLUMNS", "zero_columns", "zero_shares"]

ALL_COLUMNS = "all"
"""``sensitive_zeros = ["all"]`` (``--sensitive-zeros all``): "0" is a value in every column."""


def zero_columns(headers: Sequence[str], sensitive_zeros: Sequence[str]) -> tuple[str, ...]:
    """The headers named in ``sensitive_zeros`` (case-insensitive, trimmed); ``all`` = every one.

    >>> zero_columns(["Sex", "age"], ["sex"]), zero_columns(["Sex", "age"], ["all"])
    (('Sex',), ('Sex', 'age'))
    """
    keys = {match_key(z) for z in sensitive_zeros}
    if ALL_COLUMNS in keys:
        return tuple(headers)
    return tuple(h for h in headers if match_key(h) in keys)


def _zero_cells(column: pa.ChunkedArray) -> pa.ChunkedArray | None:
    """True where a cell reads as ``0`` once turned into text and trimmed; None: never."""
    kind = column.type
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        return pc.fill_null(pc.equal(column, pa.scalar(0).cast(kind)), False)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return pc.fill_null(pc.equal(pc.utf8_trim(column, characters=WHITESPACE), "0"), False)
    if pa.types.is_dictionary(kind):
        return _zero_cells(pc.cast(column, kind.value_type))
    return None


def zero_shares(
    table: pa.Table,
    *,
    use_columns: Sequence[str] = (),
    sensitive_zeros: Sequence[str] = (),
    record_limit: int | None = None,
) -> dict[str, float]:
    """Share of rows whose cell is ``0`` (to be emptied), per used column not in sensitive_zeros.

    Only columns with at least one such cell are listed, in table order. ``use_columns`` and
    ``sensitive_zeros`` match headers case-insensitively, as preparation does; ``record_limit``
    looks at the first rows only, as preparation does.

    >>> t = pa.table({"sex": ["0", "1", " 0"], "age": ["30", "0", "4"], "n": [0, 1, 2]})
    >>> zero_shares(t, sensitive_zeros=["age"])
    {'sex': 0.6666666666666666, 'n': 0.3333333333333333}
    """
    if record_limit:
        table = table.slice(0, record_limit)
    if table.num_rows == 0:
        return {}
    headers = list(table.column_names)
    used = set(zero_columns(headers, use_columns)) if use_columns else set(headers)
    kept = set(zero_columns(headers, sensitive_zeros))
    out: dict[str, float] = {}
    for name, column in zip(headers, table.columns, strict=True):
        if name not in used or name in kept:
            continue
        zero = _zero_cells(column)
        count = 0 if zero is None else int(pc.sum(zero).as_py() or 0)
        if count:
            out[name] = count / table.num_rows
    return out
