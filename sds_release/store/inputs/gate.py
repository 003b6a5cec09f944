"""Validation gate: a Great Expectations suite generated from the declared schema.

Runs on the input after the budget is reserved and before anything is charged, and again on
the synthetic output. GX results quote raw values, so the full result goes to the private
workspace only; callers publish :attr:`GateResult.summary` (expectation, column, pass/fail).
Failure raises :class:`SchemaValidationError` naming each failing expectation, column and the
first failing data row, never a value. GX is imported lazily (it costs ~6 s).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pyarrow as pa
from numpy.typing import NDArray

from sds_release.store.config.schema import ColumnSchema, TableSchema
from sds_release.store.inputs.gx_suite import run_suite
from sds_release.store.inputs.schema_checks import (
    FLOAT_RE,
    INTEGER_RE,
    NUMERIC_SUFFIX,
    Check,
    SchemaValidationError,
    checked_view,
    describe_failure,
    failure_message,
    numeric_view,
    schema_checks,
)
from sds_release.store.workspace.encoding import no_records
from sds_release.store.workspace.files import atomic_write_text

__all__ = [
    "FLOAT_RE",
    "INTEGER_RE",
    "NUMERIC_SUFFIX",
    "Check",
    "GateResult",
    "PublishedValuesColumn",
    "SchemaValidationError",
    "output_columns",
    "output_schema",
    "run_gate",
    "schema_checks",
    "schema_frame",
    "validate_table",
]


@dataclass(slots=True)
class GateResult:
    """Outcome of one gate run: pass/fail, public summary, private details."""

    success: bool
    summary: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


def schema_frame(table: pa.Table | pd.DataFrame, schema: TableSchema) -> pd.DataFrame:
    """Text frame the suite runs on: blank cells -> null, plus numeric views of numeric columns."""
    df = table.to_pandas() if isinstance(table, pa.Table) else table.copy()
    out = pd.DataFrame(index=df.index)
    for name in df.columns:
        s = df[name].astype("string").str.strip()
        out[name] = s.mask(s == "")
    for col in schema.columns:
        if col.type != "categorical" and col.name in out.columns:
            out[col.name + NUMERIC_SUFFIX] = _numeric_view(out[col.name])
    return out


def _numeric_view(s: pd.Series) -> NDArray[np.float64]:
    """:func:`sds_release.store.inputs.schema_checks.numeric_view` of a pandas column, as
    float64."""
    arr = pa.array(s.astype("string"), type=pa.string(), from_pandas=True)
    out: NDArray[np.float64] = numeric_view(arr).to_numpy(zero_copy_only=False)
    return out


def run_gate(table: pa.Table | pd.DataFrame, schema: TableSchema, *, name: str) -> GateResult:
    """Run the GX suite for ``schema`` on ``table``; never raises on a failing expectation."""
    frame = schema_frame(table, schema)
    present = [c for c in frame.columns if not c.endswith(NUMERIC_SUFFIX)]
    checks = schema_checks(schema, present)
    results = run_suite(frame, checks, name=name)
    gate = GateResult(success=all(r["success"] for r in results), details={"results": results})
    for check, res in zip(checks, results, strict=True):
        gate.summary.append(
            {
                "expectation": check.kind,
                "column": check.column,
                "rule": check.rule,
                "success": res["success"],
            }
        )
        if not res["success"]:
            view = checked_view(_arrow(table), schema)
            gate.failures.append(describe_failure(check, view, present, schema))
    return gate


def _arrow(table: pa.Table | pd.DataFrame) -> pa.Table:
    if isinstance(table, pa.Table):
        return table
    return pa.Table.from_pandas(table.astype("string"), preserve_index=False)


def validate_table(
    table: pa.Table | pd.DataFrame,
    schema: TableSchema,
    *,
    name: str,
    private_dir: Path,
    what: str = "input",
) -> list[dict[str, Any]]:
    """Run the gate, store full results privately, return the public summary or raise.

    Raises:
        SchemaValidationError: naming every failing expectation (no values quoted).
    """
    gate = run_gate(table, schema, name=name)
    detail_path = private_dir / f"validation-{what}.json"  # quotes input values: mode 0600
    atomic_write_text(detail_path, json.dumps(gate.details, indent=1, default=str), private=True)
    if not gate.success:
        raise SchemaValidationError(failure_message(what, gate.failures, detail_path))
    return gate.summary


def output_columns(records: Any) -> list[str]:
    """The synthetic records' published column names (multi-value columns re-joined), as
    ``to_frame`` gives them; ``records``: a table or records anywhere with a domain and
    multi-value columns."""
    from sds_core.data.decoding import to_frame

    frame = to_frame(no_records(records), empty_value="", join_multi_value_columns=True)
    return [str(c) for c in frame.columns]


class PublishedValuesColumn(ColumnSchema):
    """An output column whose allowed values are the labels the DP aggregates report for it."""

    values_are: ClassVar[str] = "values the DP aggregates report for it (length 1)"


def output_schema(
    schema: TableSchema, columns: Sequence[str], published: Mapping[str, tuple[str, ...]]
) -> TableSchema:
    """Schema for the synthetic table, from public values only (``validation.json`` publishes it).

    A declared column keeps its declaration (its declared values, type and range; empty cells
    allowed). A binned or undeclared column may hold the labels the DP aggregates report for it
    at length 1 (``published``: :meth:`AggregateSet.released_labels`; with ``mst``/``aim``, whose
    domain is itself a DP release, every label of it), never the domain found in the data, which
    also holds suppressed values: their number must not be published either.

    Args:
        schema: the declared schema.
        columns: the synthetic table's column names, in order.
        published: each column's labels in the DP aggregates' length-1 combinations.
    """
    cols: list[ColumnSchema] = []
    for name in columns:
        decl = schema.column(name)
        if decl is None or decl.bins is not None:
            cols.append(PublishedValuesColumn(name=name, values=list(published.get(name, ()))))
        else:
            cols.append(decl.model_copy(update={"nullable": True}))
    return TableSchema(columns=cols, min_rows=1, max_rows=None)
