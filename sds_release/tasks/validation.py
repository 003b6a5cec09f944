"""The ``validate`` and ``validate-output`` tasks: the Great Expectations gate on each side.

Nothing is charged before the input passes; the full results (which quote values) go only to the
private workspace, the returned summaries are redacted.
"""

from __future__ import annotations

from typing import Any

from prefect import task

from sds_core.marginals.aggregates import AggregateSet
from sds_release.store.config.core_objects import gate_columns
from sds_release.store.executor.base import Executor
from sds_release.store.inputs.gate import output_columns, output_schema
from sds_release.store.inputs.schema_checks import input_schema
from sds_release.store.run import progress, stages
from sds_release.store.run.release_run import ReleaseRun, SensitiveTable
from sds_release.store.run.stage_log import gate_text, stage_done
from sds_release.tasks.options import SENSITIVE, task_logger


@task(name=stages.VALIDATE, **SENSITIVE)
def validate_input(
    run: ReleaseRun, table: SensitiveTable[Any], executor: Executor[Any, Any]
) -> list[dict[str, Any]]:
    """The input against the declared schema, where ``executor`` holds it; raises
    ``SchemaValidationError`` on failure."""
    progress.stage("validating the input (Great Expectations)")
    params = run.params
    schema = input_schema(params.table_schema, gate_columns(params))
    summary: list[dict[str, Any]] = []
    if schema is not None:
        summary = executor.validate_input(table.value, schema, private_dir=run.dirs.private_dir)
    stage_done(task_logger(), run, stages.VALIDATE, gate_text(summary, "input"))
    return summary


@task(name=stages.VALIDATE_OUTPUT, **SENSITIVE)
def validate_output(
    run: ReleaseRun, synthetic: Any, aggregates: AggregateSet, executor: Executor[Any, Any]
) -> list[dict[str, Any]]:
    """The synthetic records against the declared schema, where ``executor`` holds them:
    declared value sets, and for binned or undeclared columns the values the DP aggregates
    report (never the domain found in the data, whose size the published summary would
    reveal), or with ``mst``/``aim`` their released domain (values kept by a thresholded DP
    1-way count: ``AggregateSet.released_labels``)."""
    summary: list[dict[str, Any]] = []
    if run.params.table_schema is not None:
        published = aggregates.released_labels()
        schema = output_schema(run.params.table_schema, output_columns(synthetic), published)
        summary = executor.validate_output(synthetic, schema, private_dir=run.dirs.private_dir)
    stage_done(task_logger(), run, stages.VALIDATE_OUTPUT, gate_text(summary, "output"))
    return summary
