"""The rows of one period of a periodic dataset (``period_column``, ``sds release --period V``).

Applied where the input is read, before anything is charged (the pre-flight and the ingest task
alike, :func:`sds_release.store.inputs.ingest.read_release_input`): the period column must exist and
hold a period in every row, period V must have rows; its rows are kept and the column itself is
dropped (never released). The cells are read in the dataset's period format
(:mod:`sds_release.store.ledger.periods`): a text cell must be a period written in it, a date is the
period holding it, an integer its digits (202610); so every row has one period. With a subject
id, each subject counts in the first period it is released in
(:class:`sds_release.store.workspace.subjects.SubjectRecord`): the ingest task leaves out the rows
of subjects already counted in another period (:func:`count_each_subject_once`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sds_core.data.text import match_key
from sds_core.errors import SdsInputError, SdsInternalError
from sds_release.store.ledger.periods import (
    DEFAULT_PERIOD_FORMAT,
    EXAMPLES,
    check_period,
    date_key,
    period_key,
)

__all__ = ["PeriodFilter", "count_each_subject_once", "select_period"]


@dataclass(frozen=True, slots=True)
class PeriodFilter:
    """Release the rows whose ``column`` (matched case-insensitively) holds ``period``, a
    period written in ``format``.

    >>> PeriodFilter.of(None, None) is None, PeriodFilter.of("month", "2026-10").period
    (True, '2026-10')
    """

    column: str
    period: str
    format: str = DEFAULT_PERIOD_FORMAT

    def __post_init__(self) -> None:
        """Refuse a period not written in its format (ReleaseParams refused it before)."""
        check_period(self.period, self.format)

    @classmethod
    def of(
        cls, column: str | None, period: str | None, fmt: str | None = None
    ) -> PeriodFilter | None:
        """The filter of a release's ``period_column``, ``period`` and ``period_format``
        (None: not periodic; ReleaseParams requires both or neither)."""
        if column is None and period is None:
            return None
        if column is None or period is None:
            raise SdsInternalError("a period filter needs both period_column and period")
        return cls(column, period, fmt or DEFAULT_PERIOD_FORMAT)


def _column_index(names: list[str], column: str) -> int | None:
    keys = [match_key(n) for n in names]
    return keys.index(match_key(column)) if match_key(column) in keys else None


def _texts(array: pa.ChunkedArray) -> pa.ChunkedArray:
    """A column as trimmed text (a Parquet month stored as an integer, too)."""
    if not pa.types.is_string(array.type) and not pa.types.is_large_string(array.type):
        array = pc.cast(array, pa.string())
    return pc.utf8_trim_whitespace(array)


def _period_keys(array: pa.ChunkedArray, fmt: str) -> pa.Array:
    """Each cell's period number in ``fmt`` (:func:`period_key`; null: not a period of it).

    A date or timestamp is the period holding it; an integer is read as its digits (202610);
    any other cell as its trimmed text, which must be a period written in ``fmt``.
    """
    encoded: Any
    found: list[int | None]
    if pa.types.is_date(array.type) or pa.types.is_timestamp(array.type):
        days = pc.add(
            pc.add(pc.multiply(pc.year(array), 10_000), pc.multiply(pc.month(array), 100)),
            pc.day(array),
        )
        encoded = pc.cast(days, pa.int64()).combine_chunks().dictionary_encode()
        found = [
            date_key(fmt, d // 10_000, d // 100 % 100, d % 100)
            for d in encoded.dictionary.to_pylist()
        ]
    else:
        digits = pa.types.is_integer(array.type)
        encoded = _texts(array).combine_chunks().dictionary_encode()
        found = [period_key(v, fmt, digits=digits) for v in encoded.dictionary.to_pylist()]
    keys = pa.array(found, type=pa.int64())
    return pc.take(keys, encoded.indices)


def select_period(table: pa.Table, wanted: PeriodFilter, *, source: str) -> pa.Table:
    """The rows of ``table`` in period ``wanted.period``, without the period column.

    Cells are read in ``wanted.format`` (:func:`_period_keys`; a text cell trimmed: `` 2026-10``
    is ``2026-10``), so a row's period has one spelling.

    Raises:
        SdsInputError: the period column is missing, empty (or null) in some row, holds a cell
            that is no period of the format, or holds no row of the period; each names the fix.
    """
    index = _column_index(table.column_names, wanted.column)
    if index is None:
        raise SdsInputError(
            f"period_column {wanted.column!r} is not a column of input '{source}' (its columns: "
            f"{table.column_names}); set period_column in the config to the column that holds "
            "each row's period, or add that column to the input"
        )
    name = table.column_names[index]
    texts = _texts(table.column(index))
    empty = pc.fill_null(pc.equal(texts, ""), True)
    if pc.any(empty).as_py():
        row = int(pc.index(empty, True).as_py()) + 1
        raise SdsInputError(
            f"input '{source}': the period column {name!r} is empty in some rows (the first is "
            f"data row {row}); every row must belong to a period: fill in those rows' periods "
            "or drop the rows before releasing"
        )
    fmt = wanted.format
    keys = _period_keys(table.column(index), fmt)
    odd = pc.is_null(keys)
    if pc.any(odd).as_py():
        row = int(pc.index(odd, True).as_py()) + 1
        raise SdsInputError(
            f"input '{source}': the period column {name!r} holds cells that are not periods "
            f"written {fmt} (the first is data row {row}); every row's period has one "
            f"spelling: write them as {fmt} (e.g. {EXAMPLES[fmt]}), or set period_format to "
            "the format the column is written in. Nothing was charged"
        )
    keep = pc.equal(keys, period_key(wanted.period, fmt))
    if not pc.any(keep).as_py():
        raise SdsInputError(
            f"input '{source}' has no row of period {wanted.period!r} in its period column "
            f"{name!r}; check --period (a period written {fmt}, e.g. --period "
            f"{EXAMPLES[fmt]}) or that the input holds that period's rows"
        )
    return table.filter(keep).remove_column(index)


def count_each_subject_once(
    table: pa.Table,
    subject_column: str,
    counted_elsewhere: Callable[[set[str]], set[str]],
    *,
    period: str,
) -> pa.Table:
    """The rows of ``table`` (one period's) whose subject does not count in another period.

    ``counted_elsewhere`` receives the period's subject ids as preparation matches them
    (trimmed, lower-cased) and returns those already counted in another period
    (:meth:`SubjectRecord.assign` in a release, :meth:`SubjectRecord.counted_elsewhere` in a
    replay). Empty ids are left to preparation, which refuses them.

    Raises:
        SdsInputError: every subject of the period already counts in earlier periods.
    """
    index = _column_index(table.column_names, subject_column)
    if index is None:  # check_column_names refused this before; a bug to get here
        raise SdsInternalError(f"subject_id column {subject_column!r} is not in the table")
    column = table.column(index)
    if not pa.types.is_string(column.type) and not pa.types.is_large_string(column.type):
        column = pc.cast(column, pa.string())
    encoded: Any = column.combine_chunks().dictionary_encode()
    keys = [match_key(v) if v is not None else "" for v in encoded.dictionary.to_pylist()]
    elsewhere = counted_elsewhere({k for k in keys if k})
    if not elsewhere:
        return table
    dropped = pa.array([k in elsewhere for k in keys], type=pa.bool_())
    drop = pc.fill_null(pc.take(dropped, encoded.indices), False)
    kept = table.filter(pc.invert(drop))
    if kept.num_rows == 0:
        raise SdsInputError(
            f"every subject of period {period!r} already counts in an earlier period (each "
            "subject counts in the first period it is released in), so this period has no "
            "rows to release; nothing was charged"
        )
    return kept
