"""The ``validate`` and ``validate-output`` tasks: the Great Expectations gate on each side.

Nothing is charged before the input passes; the full results (which quote values) go only to the
private workspace, the returned summaries are redacted.
"""

from __future__ import annotations

from typing import Any

from prefect import task

from release_store.cluster.backend import DaskBackend
from release_store.cluster.inputs import DaskInput, validate_parts
from release_store.cluster.synthesis import output_columns, validate_chunks
from release_store.config.core_objects import gate_columns
from release_store.inputs.gate import output_schema, validate_table
from release_store.inputs.schema_checks import input_schema
from release_store.run import progress, stages
from release_store.run.release_run import ReleaseRun, SensitiveTable
from release_store.run.stage_log import gate_text, stage_done
from sds_core.data.decoding import to_frame
from sds_core.data.table import PreparedTable
from sds_core.marginals.aggregates import AggregateSet
from tasks.options import SENSITIVE, task_logger


@task(name=stages.VALIDATE, **SENSITIVE)
def validate_input(run: ReleaseRun, table: SensitiveTable[Any]) -> list[dict[str, Any]]:
    """The input against the declared schema; raises ``SchemaValidationError`` on failure."""
    progress.stage("validating the input (Great Expectations)")
    params = run.params
    schema = input_schema(params.table_schema, gate_columns(params))
    summary: list[dict[str, Any]] = []
    if schema is not None and isinstance(table.value, DaskInput):
        # every partition on the workers, the same checks (Arrow, no GX there), global rows
        summary = validate_parts(table.value, schema, private_dir=run.dirs.private_dir)
    elif schema is not None:
        summary = validate_table(
            table.value, schema, name="input", private_dir=run.dirs.private_dir
        )
    stage_done(task_logger(), run, stages.VALIDATE, gate_text(summary, "input"))
    return summary


@task(name=stages.VALIDATE_OUTPUT, **SENSITIVE)
def validate_output(
    run: ReleaseRun, synthetic: PreparedTable | DaskBackend, aggregates: AggregateSet
) -> list[dict[str, Any]]:
    """The synthetic table against the declared schema: declared value sets, and for binned or
    undeclared columns the values the DP aggregates report (never the domain found in the data,
    whose size the published summary would reveal), or with ``mst``/``aim`` their released
    domain (values kept by a thresholded DP 1-way count: ``AggregateSet.released_labels``);
    records held on the Dask workers are checked there, chunk by chunk (the same checks, with
    Arrow)."""
    summary: list[dict[str, Any]] = []
    published = aggregates.released_labels()
    if run.params.table_schema is not None and isinstance(synthetic, DaskBackend):
        schema = output_schema(run.params.table_schema, output_columns(synthetic), published)
        summary = validate_chunks(synthetic, schema, private_dir=run.dirs.private_dir)
    elif run.params.table_schema is not None and isinstance(synthetic, PreparedTable):
        frame = to_frame(synthetic, empty_value="", join_multi_value_columns=True)
        schema = output_schema(run.params.table_schema, list(frame.columns), published)
        summary = validate_table(
            frame, schema, name="output", private_dir=run.dirs.private_dir, what="output"
        )
    stage_done(task_logger(), run, stages.VALIDATE_OUTPUT, gate_text(summary, "output"))
    return summary
