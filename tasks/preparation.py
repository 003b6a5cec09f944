"""The ``binning`` and ``prepare`` tasks: DP quantile bin edges (when the schema asks for them),
then SDS preprocessing of the sensitive table into integer codes."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from numpy.typing import NDArray
from prefect import task

from release_store.config.core_objects import dp_binned_columns, prepare_params
from release_store.executor.base import Executor
from release_store.inputs.preflight import zero_warning
from release_store.run import progress, stages
from release_store.run.release_run import ReleaseRun, SensitiveTable, binning_spend
from release_store.run.stage_log import finished, stage_done
from sds_core.errors import SdsInputError, SdsInternalError
from tasks.options import SENSITIVE, task_logger


@task(name=stages.BINNING, **SENSITIVE)
def choose_bins(
    run: ReleaseRun, table: SensitiveTable[Any], executor: Executor[Any, Any]
) -> dict[str, list[float]]:
    """DP quantile edges of every ``bins = { dp_quantiles = q }`` column: charged, then drawn.

    With ``subject_id`` the mechanism reads one number per subject
    (:func:`~sds_core.dp.quantiles.subject_numbers`), as the subject join keeps one record per
    subject. The numbers are read before the charge (a missing subject id is refused with
    nothing charged). Returns only the DP edges (published as the bins' labels); checkpointed,
    so a resumed release reuses them and spends nothing twice.
    """
    from sds_core.dp.quantiles import dp_quantile_edges

    progress.stage("binning (DP quantile bin edges)")
    cols = dp_binned_columns(run.params)
    spend = binning_spend(run.params)
    numbers = {} if finished(run, stages.BINNING) else _binning_numbers(run, table, cols, executor)

    def compute() -> dict[str, list[float]]:
        rnd = run.randomness()
        out: dict[str, list[float]] = {}
        for col in cols:
            q = col.bins.dp_quantiles if col.bins is not None else None
            if spend is None or q is None or col.min is None or col.max is None:
                raise SdsInternalError(f"column {col.name!r} is not a DP-binned column")
            edges = dp_quantile_edges(
                numbers[col.name],
                lower=float(col.min),
                upper=float(col.max),
                bins=q,
                epsilon=spend.epsilon / len(cols),
                integer=col.type == "integer",
                rnd=rnd,
                label=f"{run.release_id}/{stages.BINNING}/{col.name}",
                stage=stages.BINNING,
            )
            out[col.name] = list(edges)
        return out

    return run.stage(stages.BINNING, compute)


def _binning_numbers(
    run: ReleaseRun, table: SensitiveTable[Any], cols: list[Any], executor: Executor[Any, Any]
) -> dict[str, NDArray[np.float64]]:
    """What the quantile mechanism reads per DP-binned column: the numbers of the first
    ``record_limit`` rows, one per subject with ``subject_id``."""
    params = run.params
    first = executor.first_rows(table.value, params.record_limit)
    return executor.column_numbers(first, [c.name for c in cols], params.subject_id)


@task(name=stages.PREPARE, **SENSITIVE)
def prepare_table(
    run: ReleaseRun,
    table: SensitiveTable[Any],
    input_sha256: str,
    executor: Executor[Any, Any],
    dp_edges: dict[str, list[float]] | None = None,
) -> SensitiveTable[Any]:
    """Prepare the first ``record_limit`` rows where ``executor`` holds them; a resumed release
    must find the same prepared data (fingerprint).

    The "0" cells warning goes to the flow log in bands, and to the custodian's terminal as
    well when the CLI's pre-flight did not read the rows (only their column names).
    """
    progress.stage("preparing the data")
    params = run.params
    data = executor.first_rows(table.value, params.record_limit)
    zeros = executor.zero_shares(
        data, use_columns=params.use_columns, sensitive_zeros=params.sensitive_zeros
    )
    if zeros:
        task_logger().warning(zero_warning(zeros, coarse=True))  # the log: bands only
        if not executor.preflight_reads_rows and run.dirs.state().get("fingerprint") is None:
            # the CLI's pre-flight read only the column names: the terminal gets the warning
            # it prints for a local release (same text), once (not again on resume)
            progress.warning(zero_warning(zeros))
    # the rows are cut already (the one record_limit cut): prepared as they are
    core = dataclasses.replace(
        prepare_params(params, dp_edges, data.column_names), record_limit=None
    )
    prepared = executor.prepare(data, core)
    fp = executor.fingerprint(prepared)
    dirs = run.dirs
    if dirs.state().get("fingerprint") not in (None, fp):
        raise SdsInputError(
            f"input of release {run.release_id!r} changed since the release started (its "
            "prepared-data fingerprint differs); resume with the original input file, or "
            f"cancel with `sds cancel {run.release_id}` and start a new release"
        )
    dirs.update_state(fingerprint=fp, input_sha256=input_sha256)
    stage_done(
        task_logger(),
        run,
        stages.PREPARE,
        f"{prepared.domain.n_columns} columns coded as integers (SDS preprocessing)",
    )
    return SensitiveTable(prepared)
