"""The ``ingest`` task: read the sensitive input into a handle only the flow run holds."""

from __future__ import annotations

from typing import Any

from prefect import task

from release_store import progress, stages
from release_store.ingest import read_release_input
from release_store.run import ReleaseRun, SensitiveTable
from release_store.workspace import sha256_file
from tasks.options import SENSITIVE


@task(name=stages.INGEST, **SENSITIVE)
def read_input(run: ReleaseRun) -> tuple[SensitiveTable[Any], str]:
    """Read the input (only the used columns); returns the table handle and the file's sha256."""
    progress.stage("reading the input")
    params = run.params
    table = read_release_input(
        params.input,
        delimiter=params.delimiter,
        use_columns=params.use_columns,
        has_schema=params.table_schema is not None,
    )
    return SensitiveTable(table), sha256_file(params.input)
