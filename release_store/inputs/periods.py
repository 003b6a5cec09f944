"""The rows of one period of a periodic dataset (``period_column``, ``sds release --period V``).

Applied where the input is read, before anything is charged (the pre-flight and the ingest task
alike, :func:`release_store.inputs.ingest.read_release_input`): the period column must exist and
hold a period in every row, period V must have rows; its rows are kept and the column itself is
dropped (never released). With a subject id, each subject counts in the first period it is
released in (:class:`release_store.workspace.subjects.SubjectRecord`): the ingest task leaves out
the rows of subjects already counted in another period (:func:`count_each_subject_once`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from sds_core.data.text import match_key
from sds_core.errors import SdsInputError, SdsInternalError

__all__ = ["PeriodFilter", "count_each_subject_once", "select_period"]


@dataclass(frozen=True, slots=True)
class PeriodFilter:
    """Release the rows whose ``column`` (matched case-insensitively) holds ``period``.

    >>> PeriodFilter.of(None, None) is None, PeriodFilter.of("month", "2026-10").period
    (True, '2026-10')
    """

    column: str
    period: str

    @classmethod
    def of(cls, column: str | None, period: str | None) -> PeriodFilter | None:
        """The filter of a release's ``period_column`` and ``period`` (None: not periodic;
        ReleaseParams requires both or neither)."""
        if column is None and period is None:
            return None
        if column is None or period is None:
            raise SdsInternalError("a period filter needs both period_column and period")
        return cls(column, period)


def _column_index(names: list[str], column: str) -> int | None:
    keys = [match_key(n) for n in names]
    return keys.index(match_key(column)) if match_key(column) in keys else None


def _texts(array: pa.ChunkedArray) -> pa.ChunkedArray:
    """A column as trimmed text (a Parquet month stored as a date or an integer, too)."""
    if not pa.types.is_string(array.type) and not pa.types.is_large_string(array.type):
        array = pc.cast(array, pa.string())
    return pc.utf8_trim_whitespace(array)


def select_period(table: pa.Table, wanted: PeriodFilter, *, source: str) -> pa.Table:
    """The rows of ``table`` in period ``wanted.period``, without the period column.

    Cells are compared as trimmed text (``2026-10`` matches `` 2026-10 ``).

    Raises:
        SdsInputError: the period column is missing, empty (or null) in some row, or holds
            no row of the period; each names the fix.
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
    keep = pc.equal(texts, wanted.period.strip())
    if not pc.any(keep).as_py():
        raise SdsInputError(
            f"input '{source}' has no row of period {wanted.period!r} in its period column "
            f"{name!r}; check --period (it must equal the column's text exactly, e.g. "
            "--period 2026-10) or that the input holds that period's rows"
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
