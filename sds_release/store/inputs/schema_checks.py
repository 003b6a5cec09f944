"""The checks a declared schema makes on a table, evaluated with Arrow kernels (no pandas, no GX).

:func:`schema_checks` lists them (the Great Expectations gate in
:mod:`sds_release.store.inputs.gate` runs the same list as expectations); :func:`schema_failures`
evaluates them directly on an Arrow table, which is how the CLI's pre-flight refuses a bad input in
well under a second, before Prefect or GX load. Failure texts name the check, the column and the
first failing data row, never a value.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sds_core.errors import SdsInputError
from sds_release.store.config.schema import ColumnSchema, TableSchema

__all__ = [
    "FLOAT_RE",
    "INTEGER_RE",
    "NUMERIC_SUFFIX",
    "Check",
    "SchemaValidationError",
    "checked_view",
    "describe_failure",
    "failure_message",
    "failure_text",
    "input_schema",
    "numeric_view",
    "schema_checks",
    "schema_failures",
    "table_check_fails",
    "view_columns",
]

# Cells are stripped before the checks (checked_view). ASCII classes only and no \s: the regex
# runs in Arrow (RE2), as pandas runs it on its pyarrow-backed strings
INTEGER_RE = r"^[-+]?[0-9]+(?:\.0*)?$"
FLOAT_RE = r"^[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?$"
NUMERIC_SUFFIX = " (as number)"


class SchemaValidationError(SdsInputError):
    """The table breaks its declared schema; the message names expectations, columns, rows."""


@dataclass(frozen=True, slots=True)
class Check:
    """One expectation: its GX name, the column it reads, the rule in words, its GX kwargs."""

    kind: str
    column: str | None
    rule: str
    kwargs: dict[str, Any]


def numeric_view(cells: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Cells that are numbers (FLOAT_RE) as float64, everything else NaN.

    Same values as ``pd.to_numeric(errors="coerce")`` on the stripped cells, except the words
    "inf"/"nan", which FLOAT_RE rejects anyway (the regex check names them).
    """
    text = pc.cast(cells, pa.large_string())
    ok = pc.fill_null(pc.match_substring_regex(text, FLOAT_RE), False)
    numbers = pc.cast(pc.if_else(ok, text, pa.scalar(None, pa.large_string())), pa.float64())
    return pc.fill_null(numbers, float("nan"))


def checked_view(table: pa.Table, schema: TableSchema) -> dict[str, pa.ChunkedArray]:
    """The cells the checks read: stripped text, blank -> null, plus numeric views.

    The Arrow form of the frame the GX gate validates (:func:`sds_release.store.inputs.gate.
    schema_frame`): the same strip (Unicode whitespace) and the same numeric parsing.
    """
    view: dict[str, pa.ChunkedArray] = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        text = pc.utf8_trim_whitespace(pc.cast(column, pa.large_string()))
        view[name] = pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.large_string()), text)
    for col in schema.columns:
        if col.type != "categorical" and col.name in view:
            view[col.name + NUMERIC_SUFFIX] = numeric_view(view[col.name])
    return view


def input_schema(schema: TableSchema | None, columns: list[str]) -> TableSchema | None:
    """The schema the input is checked against: the declared one, cut to ``columns`` (the
    gate's columns, :func:`sds_release.store.config.core_objects.gate_columns`; empty: all of
    it)."""
    if schema is None or not columns:
        return schema
    return schema.model_copy(update={"columns": [c for c in schema.columns if c.name in columns]})


def schema_checks(schema: TableSchema, present: list[str]) -> list[Check]:
    """The expectations of ``schema`` (present = the input's column names)."""
    declared = [c.name for c in schema.columns]
    declared += [
        c.name + NUMERIC_SUFFIX
        for c in schema.columns
        if c.type != "categorical" and c.name in present
    ]
    checks = [
        Check(
            "expect_table_columns_to_match_set",
            None,
            "the input columns must be exactly the declared columns",
            {"column_set": declared, "exact_match": not schema.allow_extra_columns},
        ),
        Check(
            "expect_table_row_count_to_be_between",
            None,
            f"the number of rows must be between {schema.min_rows} and {schema.max_rows or 'any'}",
            {"min_value": schema.min_rows, "max_value": schema.max_rows},
        ),
    ]
    for col in schema.columns:
        if col.name not in present:
            continue
        checks.extend(_column_checks(col))
    return checks


def _column_checks(col: ColumnSchema) -> list[Check]:
    name, out = col.name, []
    if not col.nullable:
        out.append(
            Check(
                "expect_column_values_to_not_be_null", name, "must not be empty", {"column": name}
            )
        )
    if col.type == "integer":
        out.append(
            Check(
                "expect_column_values_to_match_regex",
                name,
                "must be an integer",
                {"column": name, "regex": INTEGER_RE},
            )
        )
    elif col.type == "float":
        out.append(
            Check(
                "expect_column_values_to_match_regex",
                name,
                "must be a number",
                {"column": name, "regex": FLOAT_RE},
            )
        )
    if col.values is not None:
        out.append(
            Check(
                "expect_column_values_to_be_in_set",
                name,
                f"must be one of the {len(col.values)} {col.values_are}",
                {"column": name, "value_set": list(col.values)},
            )
        )
    if col.type != "categorical" and (col.min is not None or col.max is not None):
        out.append(
            Check(
                "expect_column_values_to_be_between",
                name,
                f"must be between {col.min} and {col.max}",
                {"column": name + NUMERIC_SUFFIX, "min_value": col.min, "max_value": col.max},
            )
        )
    return out


def _bad_cells(check: Check, view: dict[str, pa.ChunkedArray]) -> pa.ChunkedArray:
    """True where a cell breaks a column check (empty cells break only the not-null check)."""
    s = view[check.kwargs["column"]]
    if check.kind == "expect_column_values_to_not_be_null":
        return pc.is_null(s)
    if check.kind == "expect_column_values_to_match_regex":
        bad = pc.invert(pc.match_substring_regex(s, check.kwargs["regex"]))
    elif check.kind == "expect_column_values_to_be_in_set":
        value_set = pa.array(check.kwargs["value_set"], type=pa.large_string())
        bad = pc.invert(pc.is_in(s, value_set=value_set))
    else:
        lo, hi = check.kwargs["min_value"], check.kwargs["max_value"]
        low = pc.less(s, lo) if lo is not None else pc.not_equal(s, s)  # all False (or NaN)
        high = pc.greater(s, hi) if hi is not None else pc.not_equal(s, s)
        bad = pc.or_(pc.fill_null(low, False), pc.fill_null(high, False))
    return pc.fill_null(pc.and_(pc.is_valid(s), bad), False)


def first_failing_row(check: Check, view: dict[str, pa.ChunkedArray]) -> int | None:
    """1-based data row of the first cell that breaks a column check, or None."""
    bad = _bad_cells(check, view)
    if not pc.any(bad).as_py():
        return None
    idx = np.flatnonzero(bad.to_numpy(zero_copy_only=False))
    return int(idx[0]) + 1


def describe_failure(
    check: Check, view: dict[str, pa.ChunkedArray], present: list[str], schema: TableSchema
) -> str:
    """One failing check in words: the columns, or the column and its first failing row."""
    row = None if check.column is None else first_failing_row(check, view)
    return failure_text(check, present, schema, row)


def failure_text(check: Check, present: list[str], schema: TableSchema, row: int | None) -> str:
    """:func:`describe_failure` given the first failing data row (1-based; column checks)."""
    if check.kind == "expect_table_columns_to_match_set":
        declared = [c.name for c in schema.columns]
        extra = [c for c in present if c not in declared]
        missing = [c for c in declared if c not in present]
        parts = []
        if missing:
            parts.append(f"declared column(s) {missing} are missing from the input")
        if extra:
            parts.append(
                f"input column(s) {extra} are not in the schema (declare them or drop "
                "them with use_columns)"
            )
        return "columns: " + "; ".join(parts or ["do not match the declared set"])
    if check.kind == "expect_table_row_count_to_be_between":
        return f"table: {check.rule}"
    where = f" (first failing data row {row})" if row is not None else ""
    return f"column '{check.column}': values {check.rule}{where}"


def view_columns(present: list[str], schema: TableSchema) -> list[str]:
    """The columns of :func:`checked_view` of a table with columns ``present``."""
    return [
        *present,
        *(
            c.name + NUMERIC_SUFFIX
            for c in schema.columns
            if c.type != "categorical" and c.name in present
        ),
    ]


def table_check_fails(check: Check, columns: list[str], n: int) -> bool:
    """Whether a table check (column set, row count) fails, for a table of ``n`` rows whose
    checked view has ``columns`` (:func:`view_columns`)."""
    if check.kind == "expect_table_columns_to_match_set":
        declared = set(check.kwargs["column_set"])
        missing = declared - set(columns)
        extra = set(columns) - declared
        return bool(missing) or (bool(extra) and check.kwargs["exact_match"])
    lo, hi = check.kwargs["min_value"], check.kwargs["max_value"]
    return (lo is not None and n < lo) or (hi is not None and n > hi)


def _fails(check: Check, view: dict[str, pa.ChunkedArray], present: list[str], n: int) -> bool:
    if check.column is None:  # the numeric views are columns of the validated frame too
        return table_check_fails(check, list(view), n)
    return first_failing_row(check, view) is not None


def schema_failures(table: pa.Table, schema: TableSchema) -> list[str]:
    """Every check of ``schema`` that ``table`` fails, in words (empty: the table passes).

    The same checks, the same verdicts and the same texts as the GX gate, computed with Arrow
    kernels only; the gate in the flow still runs GX and keeps its full results privately.
    """
    view = checked_view(table, schema)
    present = list(table.column_names)
    return [
        describe_failure(check, view, present, schema)
        for check in schema_checks(schema, present)
        if _fails(check, view, present, table.num_rows)
    ]


def failure_message(what: str, failures: list[str], detail_path: Path | None) -> str:
    """The one-paragraph refusal: the failures, where the details are, and the fix."""
    details = (
        f" Full details with the offending values: {detail_path} (private)."
        if detail_path is not None
        else ""
    )
    return (
        f"{what} validation failed ({len(failures)} expectation(s)): "
        + "; ".join(failures)
        + f".{details} Fix the data or the declared schema in the config, then run again; "
        "nothing was charged."
    )
