"""The ``ingest`` task: read the sensitive input into a handle only the flow run holds.

With ``privacy_risk`` the handle holds the training part only: the control rows are held back
here, before anything is charged, into the private workspace (the evaluate stage attacks the
synthetic records with them).
"""

from __future__ import annotations

from typing import Any

from prefect import task

from sds_release.store.compare.risk import anonymeter_python
from sds_release.store.executor.base import Executor
from sds_release.store.inputs.holdback import CONTROL_FILE, CONTROL_LABEL, CONTROL_SHARE, hold_back
from sds_release.store.inputs.periods import count_each_subject_once
from sds_release.store.run import progress, stages
from sds_release.store.run.release_run import ReleaseRun, SensitiveTable
from sds_release.store.run.stage_log import stage_done
from sds_release.store.workspace.files import atomic_write_parquet
from sds_release.tasks.options import SENSITIVE, task_logger


@task(name=stages.INGEST, **SENSITIVE)
def read_input(run: ReleaseRun, executor: Executor[Any, Any]) -> tuple[SensitiveTable[Any], str]:
    """Read the input (only the used columns) where ``executor`` works; returns the table
    handle and its sha256.

    The sha256 stays private (the prepare stage's state, the publish stage's commitment). A
    period's subjects and the held-back control rows are cut from the table read here (the
    parameters refuse both with an executor that reads elsewhere).
    """
    progress.stage("reading the input")
    params = run.params
    table, digest = executor.read_input(params, private_dir=run.dirs.private_dir)
    where = executor.held(table, "parts")
    if params.period is not None:
        where += f" (the rows of period {params.period})"
        if params.subject_id is not None:
            table = first_period_subjects(run, table)
    if params.privacy_risk:
        table = hold_back_control(run, table)
        share = f"{CONTROL_SHARE:.0%}"
        where += f"; rows (subjects) held back with chance {share} each as private control rows"
    stage_done(
        task_logger(),
        run,
        stages.INGEST,
        # no hash of the input here: the plain sha256 would let anyone who sees the log confirm
        # a guessed file; the manifest publishes a keyed commitment instead
        f"read {len(table.column_names)} columns of the input{where}",
    )
    return SensitiveTable(table), digest


def hold_back_control(run: ReleaseRun, table: Any) -> Any:
    """The training part of ``table``, the part released; the control part, cut by the
    release key (a resume or replay cuts identically), goes to the private workspace only.

    Raises:
        SdsInputError: no anonymeter environment, or too few rows (subjects) for the control
            part; both before anything is charged.
    """
    anonymeter_python()  # the evaluation will need it: refuse now, before any charge
    seed = run.randomness().record_key(CONTROL_LABEL)
    training, control = hold_back(table, seed=seed, subject_id=run.params.subject_id)
    atomic_write_parquet(run.dirs.private_dir / CONTROL_FILE, control, private=True)
    return training


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
