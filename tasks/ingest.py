"""The ``ingest`` task: read the sensitive input into a handle only the flow run holds."""

from __future__ import annotations

from typing import Any

from prefect import task

from release_store import progress, stages
from release_store.ingest import read_release_input
from release_store.params import gate_columns
from release_store.run import ReleaseRun, SensitiveTable
from release_store.stage_log import stage_done
from tasks.options import SENSITIVE, task_logger


@task(name=stages.INGEST, **SENSITIVE)
def read_input(run: ReleaseRun) -> tuple[SensitiveTable[Any], str]:
    """Read the input (only the used columns); returns the table handle and the file's sha256."""
    progress.stage("reading the input")
    params = run.params
    table, digest = read_release_input(
        params.input, delimiter=params.delimiter, gate_columns=gate_columns(params)
    )
    stage_done(
        task_logger(),
        run,
        stages.INGEST,
        f"read {table.num_columns} columns of the input (file sha256 {digest[:16]}…)",
    )
    return SensitiveTable(table), digest
