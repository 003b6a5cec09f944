"""The ``validate`` and ``validate-output`` tasks: the Great Expectations gate on each side.

Nothing is charged before the input passes; the full results (which quote values) go only to the
private workspace, the returned summaries are redacted.
"""

from __future__ import annotations

from typing import Any

from prefect import task

from release_store import progress, stages
from release_store.run import ReleaseRun, SensitiveTable
from release_store.schema_checks import input_schema
from release_store.validation import output_schema, validate_table
from sds_core.data.decoding import to_frame
from sds_core.data.table import PreparedTable
from tasks.options import SENSITIVE


@task(name=stages.VALIDATE, **SENSITIVE)
def validate_input(run: ReleaseRun, table: SensitiveTable[Any]) -> list[dict[str, Any]]:
    """The input against the declared schema; raises ``SchemaValidationError`` on failure."""
    progress.stage("validating the input (Great Expectations)")
    schema = input_schema(run.params.table_schema, run.params.use_columns)
    if schema is None:
        return []
    return validate_table(table.value, schema, name="input", private_dir=run.dirs.private_dir)


@task(name=stages.VALIDATE_OUTPUT, **SENSITIVE)
def validate_output(run: ReleaseRun, synthetic: PreparedTable) -> list[dict[str, Any]]:
    """The synthetic table against the declared schema (bins and value sets)."""
    if run.params.table_schema is None:
        return []
    frame = to_frame(synthetic, empty_value="", join_multi_value_columns=True)
    labels = dict(zip(synthetic.domain.columns, synthetic.domain.labels, strict=True))
    schema = output_schema(run.params.table_schema, {c: labels.get(c, ()) for c in frame.columns})
    return validate_table(
        frame, schema, name="output", private_dir=run.dirs.private_dir, what="output"
    )
