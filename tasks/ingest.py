"""The ``ingest`` task: read the sensitive input into a handle only the flow run holds."""

from __future__ import annotations

from typing import Any

from prefect import task

from release_store import progress, stages
from release_store.ingest import read_table_with_digest
from release_store.run import ReleaseRun, SensitiveTable
from release_store.stage_log import stage_done
from tasks.options import SENSITIVE, task_logger


@task(name=stages.INGEST, **SENSITIVE)
def read_input(run: ReleaseRun) -> tuple[SensitiveTable[Any], str]:
    """Read the input (only the used columns); returns the table handle and the file's sha256."""
    progress.stage("reading the input")
    params = run.params
    table, digest = read_table_with_digest(params.input, delimiter=params.delimiter)
    if params.use_columns and params.table_schema is not None:  # the gate sees these only
        kept = {*params.use_columns, params.subject_id}
        table = table.select([c for c in table.column_names if c in kept])
    stage_done(
        task_logger(),
        run,
        stages.INGEST,
        f"read {table.num_columns} columns of the input (file sha256 {digest[:16]}…)",
    )
    return SensitiveTable(table), digest
