"""The ``ingest`` task: read the sensitive input into a handle only the flow run holds."""

from __future__ import annotations

from typing import Any

from prefect import task

from release_store.cluster.inputs import open_input
from release_store.cluster.session import session_client
from release_store.config.core_objects import gate_columns
from release_store.inputs.ingest import read_release_input
from release_store.inputs.periods import PeriodFilter, count_each_subject_once
from release_store.run import progress, stages
from release_store.run.release_run import ReleaseRun, SensitiveTable
from release_store.run.stage_log import stage_done
from tasks.options import SENSITIVE, task_logger


@task(name=stages.INGEST, **SENSITIVE)
def read_input(run: ReleaseRun) -> tuple[SensitiveTable[Any], str]:
    """Read the input (only the used columns); returns the table handle and its sha256.

    The sha256 stays private (the prepare stage's state, the publish stage's commitment).

    With the Dask executor the handle is a :class:`~release_store.cluster.inputs.DaskInput`
    (Arrow parts on the workers), else an Arrow table in this process.
    """
    progress.stage("reading the input")
    params = run.params
    client = session_client(params)
    table: Any
    if client is not None:  # executor "dask": the parts stay on the workers
        table, digest = open_input(
            client,
            params.input,
            delimiter=params.delimiter,
            gate_columns=gate_columns(params),
            partitions=params.dask_partitions,
        )
        where = f" in {len(table.parts)} parts on the Dask workers"
    else:
        table, digest = read_release_input(
            params.input,
            delimiter=params.delimiter,
            gate_columns=gate_columns(params),
            period=PeriodFilter.of(params.period_column, params.period),
            table=params.table,
            query=params.query,
        )
        where = ""
        if params.period is not None:
            where = f" (the rows of period {params.period})"
            if params.subject_id is not None:
                table = first_period_subjects(run, table)
    stage_done(
        task_logger(),
        run,
        stages.INGEST,
        # no hash of the input here: the plain sha256 would let anyone who sees the log confirm
        # a guessed file; the manifest publishes a keyed commitment instead
        f"read {len(table.column_names)} columns of the input{where}",
    )
    return SensitiveTable(table), digest


def first_period_subjects(run: ReleaseRun, table: Any) -> Any:
    """The period's rows of the subjects that count in it: each subject counts in the first
    period it is released in, recorded (as keyed hashes) before anything is charged; a replay
    only reads the record."""
    record, period = run.subject_record(), str(run.params.period)

    def counted_elsewhere(subjects: set[str]) -> set[str]:
        if run.replay is not None:
            return record.counted_elsewhere(period, subjects)
        return record.assign(period, run.release_id, subjects)

    return count_each_subject_once(
        table, str(run.params.subject_id), counted_elsewhere, period=period
    )
