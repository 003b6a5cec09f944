"""The schema gate on the Dask executor: the input's parts and the synthetic records' chunks
checked on the workers, with the local gate's summary and refusal text.

The checks are :func:`~sds_release.store.inputs.schema_checks.schema_checks` (those the GX suite
runs), evaluated with Arrow on the workers (no GX there); each column check's first failing row
is counted across the parts (global data rows).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from sds_core.data.table import PreparedTable
from sds_release.store.cluster.inputs import DaskInput
from sds_release.store.cluster.table import ClusterTable
from sds_release.store.config.schema import TableSchema
from sds_release.store.inputs.gate import output_columns
from sds_release.store.inputs.schema_checks import (
    SchemaValidationError,
    checked_view,
    failure_message,
    failure_text,
    first_failing_row,
    schema_checks,
    table_check_fails,
    view_columns,
)
from sds_release.store.workspace.files import atomic_write_text


def _first_failures(table: pa.Table, schema: TableSchema) -> list[int | None]:
    """On a worker: each column check's first failing row in this part (1-based), or None."""
    view = checked_view(table, schema)
    checks = schema_checks(schema, list(table.column_names))
    return [first_failing_row(c, view) for c in checks if c.column is not None]


def validate_parts(
    data: DaskInput, schema: TableSchema, *, private_dir: Path, what: str = "input"
) -> list[dict[str, Any]]:
    """The gate on every part: the checks of :func:`~sds_release.store.inputs.schema_checks.
    schema_checks` (those the GX suite runs; evaluated with Arrow on the workers, no GX
    there), each column check's first failing row counted across parts (global data rows).

    Returns the public summary (expectation, column, rule, success) as the local gate; the
    per-check verdicts go to ``private_dir/validation-<what>.json`` (``what``: ``input``, or
    ``output`` for the synthetic records' chunks).

    Raises:
        SchemaValidationError: the local gate's message (the failing checks, the first failing
            data row of each), nothing charged.
    """
    present = data.column_names
    checks = schema_checks(schema, present)
    per_part = data.client.gather(data.client.map(_first_failures, data.parts, schema=schema))
    offsets = np.concatenate([[0], np.cumsum(data.rows)[:-1]]).astype(int).tolist()
    first: list[int | None] = []
    for j in range(sum(c.column is not None for c in checks)):
        rows = [off + part[j] for off, part in zip(offsets, per_part, strict=True) if part[j]]
        first.append(min(rows) if rows else None)
    columns, n = view_columns(present, schema), data.num_rows
    summary, failures, results = [], [], []
    column_rows = iter(first)
    for check in checks:
        row = next(column_rows) if check.column is not None else None
        failed = (
            row is not None if check.column is not None else table_check_fails(check, columns, n)
        )
        summary.append(
            {
                "expectation": check.kind,
                "column": check.column,
                "rule": check.rule,
                "success": not failed,
            }
        )
        results.append({**summary[-1], "first_failing_row": row})
        if failed:
            failures.append(failure_text(check, present, schema, row))
    detail = private_dir / f"validation-{what}.json"  # rows, not values: private all the same
    atomic_write_text(
        detail,
        json.dumps({"engine": "arrow checks per partition", "results": results}, indent=1),
        private=True,
    )
    if failures:
        raise SchemaValidationError(failure_message(what, failures, detail))
    return summary


def _as_text(table: PreparedTable) -> pa.Table:
    """On a worker: a chunk as the gate's table of texts (empty cells ``""``)."""
    from sds_core.data.decoding import to_arrow

    return to_arrow(table, empty_value="", join_multi_value_columns=True)


def validate_chunks(
    synthetic: ClusterTable, schema: TableSchema, *, private_dir: Path
) -> list[dict[str, Any]]:
    """The output gate on every chunk on the workers (:func:`validate_parts` of their texts):
    the local gate's summary and message, each check's first failing row counted over the
    whole synthetic table."""
    client = synthetic.client
    texts = client.map(_as_text, synthetic.parts)
    bounds = (*synthetic.first_rows, synthetic.n_records)
    sizes = [hi - lo for lo, hi in itertools.pairwise(bounds)]
    data = DaskInput(
        client, tuple(texts), tuple(sizes), tuple(output_columns(synthetic)), "synthetic"
    )
    return validate_parts(data, schema, private_dir=private_dir, what="output")
