"""The ``prepare`` task: SDS preprocessing of the sensitive table into integer codes."""

from __future__ import annotations

from typing import Any

from prefect import get_run_logger, task

from release_store import progress, stages
from release_store.params import prepare_params
from release_store.preflight import zero_warning
from release_store.run import ReleaseRun, SensitiveTable
from sds_core.data.decoding import fingerprint
from sds_core.data.preparation import prepare
from sds_core.data.table import PreparedTable
from sds_core.data.zeros import zero_shares
from sds_core.errors import SdsInputError
from tasks.options import SENSITIVE


@task(name=stages.PREPARE, **SENSITIVE)
def prepare_table(
    run: ReleaseRun, table: SensitiveTable[Any], input_sha256: str
) -> SensitiveTable[PreparedTable]:
    """Prepare the table; a resumed release must find the same prepared data (fingerprint)."""
    progress.stage("preparing the data")
    params = run.params
    zeros = zero_shares(
        table.value,
        use_columns=params.use_columns,
        sensitive_zeros=params.sensitive_zeros,
        record_limit=params.record_limit,
    )
    if zeros:
        get_run_logger().warning(zero_warning(zeros, coarse=True))
    prepared = prepare(table.value, prepare_params(params, table.value.column_names))
    fp = fingerprint(prepared)
    dirs = run.dirs
    if dirs.state().get("fingerprint") not in (None, fp):
        raise SdsInputError(
            f"input of release {run.release_id!r} changed since the release started (its "
            "prepared-data fingerprint differs); resume with the original input file, or "
            f"cancel with `sds cancel {run.release_id}` and start a new release"
        )
    dirs.update_state(fingerprint=fp, input_sha256=input_sha256)
    return SensitiveTable(prepared)
