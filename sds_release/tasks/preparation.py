"""The ``binning`` and ``prepare`` tasks: DP quantile bin edges (when the schema asks for them),
then SDS preprocessing of the sensitive table into integer codes."""

from __future__ import annotations

import dataclasses
from typing import Any

from prefect import task

from sds_core.errors import SdsInputError, SdsInternalError
from sds_release.store.config.core_objects import dp_binned_columns, prepare_params
from sds_release.store.config.planned import check_synthesis_sizes
from sds_release.store.executor.base import Executor
from sds_release.store.inputs.preflight import subject_conflict, zero_warning
from sds_release.store.run import progress, stages
from sds_release.store.run.release_run import ReleaseRun, SensitiveTable, binning_spend
from sds_release.store.run.stage_log import finished, stage_done
from sds_release.tasks.options import SENSITIVE, task_logger


@task(name=stages.BINNING, **SENSITIVE)
def choose_bins(
    run: ReleaseRun, table: SensitiveTable[Any], executor: Executor[Any, Any]
) -> dict[str, list[float]]:
    """DP quantile edges of every ``bins = { dp_quantiles = q }`` column: charged, then drawn.

    With ``subject_id`` the mechanism reads one number per subject
    (:func:`~sds_core.dp.quantiles.subject_numbers`), as the subject join keeps one record per
    subject. The numbers are read, and the subject join's conflicts checked, before the charge
    (a missing subject id, or a subject whose rows disagree, is refused with nothing charged).
    Returns only the DP edges (published as the bins' labels); checkpointed, so a resumed
    release reuses them and spends nothing twice.
    """
    from sds_core.dp.quantiles import dp_quantile_edges

    progress.stage("binning (DP quantile bin edges)")
    cols = dp_binned_columns(run.params)
    spend = binning_spend(run.params)
    numbers = {}
    if not finished(run, stages.BINNING):  # refusals before the charge, then the numbers
        first = executor.first_rows(table.value, run.params.record_limit)
        _check_subject_join(run.params, first, [c.name for c in cols], executor)
        _check_sizes(run.params, first, cols, executor)
        numbers = executor.column_numbers(first, [c.name for c in cols], run.params.subject_id)

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


def _check_subject_join(
    params: Any, first: Any, binned: list[str], executor: Executor[Any, Any]
) -> None:
    """Refuse, before the charge, subject rows that the join after it would refuse (the
    executor checks at least the DP-binned columns: locally every single-value column)."""
    if params.subject_id is None:
        return
    core = prepare_params(params, None, first.column_names, before_dp_bins=True)
    conflicts = executor.subject_conflicts(
        first, dataclasses.replace(core, record_limit=None), binned
    )
    if conflicts:
        raise subject_conflict(params, conflicts)


def _check_sizes(params: Any, first: Any, binned: list[Any], executor: Executor[Any, Any]) -> None:
    """The synthesis's sizes (:func:`check_synthesis_sizes`) before the binning charge: each
    column's values counted as preparation will code them, a DP-binned column as its q bins,
    when the executor counts them before preparation (else the count stage checks the prepared
    domain, before its own charge)."""
    from sds_core.data.text import match_key

    core = prepare_params(params, None, first.column_names, before_dp_bins=True)
    counted = executor.label_counts(first, dataclasses.replace(core, record_limit=None))
    if counted is None:
        return
    bins = {match_key(c.name): c.bins.dp_quantiles for c in binned}
    counts = [(name, bins.get(match_key(name), n)) for name, n in counted]
    check_synthesis_sizes(params, [name for name, _ in counts], [n for _, n in counts])


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

    The "0" cells SDS empties are counted from the data, so they are not DP: their warning
    goes to the custodian's terminal (the CLI's pre-flight prints it when it read the rows;
    otherwise, with an executor whose pre-flight reads only the header, this stage does) and
    to the private custodian report (the shares are kept in the private state), never to the
    run's log, which UI users read.
    """
    progress.stage("preparing the data")
    params = run.params
    data = executor.first_rows(table.value, params.record_limit)
    zeros = executor.zero_shares(
        data, use_columns=params.use_columns, sensitive_zeros=params.sensitive_zeros
    )
    if zeros and not executor.preflight_reads_rows and run.dirs.state().get("fingerprint") is None:
        # the CLI's pre-flight read only the column names: the terminal gets the warning it
        # prints for a local release (same text), once (not again on resume)
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
    dirs.update_state(fingerprint=fp, input_sha256=input_sha256, zero_shares=zeros)
    stage_done(
        task_logger(),
        run,
        stages.PREPARE,
        f"{prepared.domain.n_columns} columns coded as integers (SDS preprocessing)",
    )
    return SensitiveTable(prepared)
