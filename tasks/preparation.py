"""The ``binning`` and ``prepare`` tasks: DP quantile bin edges (when the schema asks for them),
then SDS preprocessing of the sensitive table into integer codes."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from prefect import task

from release_store.cluster.backend import DaskBackend
from release_store.cluster.inputs import (
    DaskInput,
    column_numbers,
    fingerprint_parts,
    prepare_parts,
    subject_conflicts,
    zero_counts_shares,
)
from release_store.cluster.session import session_backend
from release_store.config.core_objects import dp_binned_columns, prepare_params
from release_store.config.planned import check_synthesis_sizes
from release_store.inputs.preflight import check_subject_join, subject_conflict, zero_warning
from release_store.run import progress, stages
from release_store.run.release_run import ReleaseRun, SensitiveTable, binning_spend
from release_store.run.stage_log import finished, stage_done
from sds_core.data.decoding import fingerprint
from sds_core.data.preparation import prepare
from sds_core.data.table import PreparedTable
from sds_core.data.text import matching_column
from sds_core.data.zeros import zero_shares
from sds_core.errors import SdsInputError, SdsInternalError
from tasks.options import SENSITIVE, task_logger


@task(name=stages.BINNING, **SENSITIVE)
def choose_bins(run: ReleaseRun, table: SensitiveTable[Any]) -> dict[str, list[float]]:
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
    if not finished(run, stages.BINNING):
        _check_subject_join(run.params, table.value, [c.name for c in cols])
        if not isinstance(table.value, DaskInput):  # on Dask: the count stage's check
            _check_sizes(run.params, table.value, cols)
        numbers = _binning_numbers(run, table, cols)

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


def _check_subject_join(params: Any, table: Any, binned: list[str]) -> None:
    """Refuse, before the charge, subject rows that the join after it would refuse (locally in
    every single-value column; on the Dask workers in the DP-binned columns)."""
    if not isinstance(table, DaskInput):
        check_subject_join(params, table)
        return
    if params.subject_id is None:
        return
    core = prepare_params(params, None, table.column_names, before_dp_bins=True)
    conflicts = subject_conflicts(table, core, binned)
    if conflicts:
        raise subject_conflict(params, conflicts)


def _check_sizes(params: Any, table: Any, binned: list[Any]) -> None:
    """The synthesis's sizes (:func:`check_synthesis_sizes`) before the binning charge: each
    column's values counted as preparation will code them, a DP-binned column as its q bins."""
    from sds_core.data.preparation import label_counts
    from sds_core.data.text import match_key

    core = prepare_params(params, None, table.column_names, before_dp_bins=True)
    bins = {match_key(c.name): c.bins.dp_quantiles for c in binned}
    counts = [(name, bins.get(match_key(name), n)) for name, n in label_counts(table, core)]
    check_synthesis_sizes(params, [name for name, _ in counts], [n for _, n in counts])


def _binning_numbers(
    run: ReleaseRun, table: SensitiveTable[Any], cols: list[Any]
) -> dict[str, NDArray[np.float64]]:
    """What the quantile mechanism reads per DP-binned column: the numbers of the first
    ``record_limit`` rows, one per subject with ``subject_id``."""
    import pandas as pd

    from sds_core.dp.quantiles import subject_numbers

    params = run.params
    limit = params.record_limit
    if isinstance(table.value, DaskInput):  # one numeric column gathered (per subject: minima)
        return {c.name: column_numbers(table.value, c.name, limit, params.subject_id) for c in cols}
    subject, subjects = params.subject_id, None
    if subject is not None:
        subjects = table.value.column(matching_column(table.value.column_names, subject))
        subjects = subjects.to_pylist()[:limit]
    out = {}
    for col in cols:
        raw = table.value.column(col.name).to_pylist()[:limit]
        values = pd.to_numeric(pd.Series(raw, dtype="string"), errors="coerce")
        parsed = values.to_numpy(dtype=np.float64, na_value=np.nan)
        if subject is None or subjects is None:
            out[col.name] = parsed[~np.isnan(parsed)]
        else:
            out[col.name] = subject_numbers(parsed, subjects, subject_column=subject)[1]
    return out


@task(name=stages.PREPARE, **SENSITIVE)
def prepare_table(
    run: ReleaseRun,
    table: SensitiveTable[Any],
    input_sha256: str,
    dp_edges: dict[str, list[float]] | None = None,
) -> SensitiveTable[PreparedTable | DaskBackend]:
    """Prepare the table; a resumed release must find the same prepared data (fingerprint).

    With the Dask executor the prepared table is a :class:`DaskBackend` (partitions on the
    workers) with the local table's fingerprint.

    The "0" cells SDS empties are counted from the data, so they are not DP: their warning
    goes to the custodian's terminal (the CLI's pre-flight prints it; with the Dask executor,
    whose pre-flight reads only the header, this stage does) and to the private custodian
    report (the shares are kept in the private state), never to the run's log, which UI users
    read.
    """
    progress.stage("preparing the data")
    params = run.params
    on_workers = isinstance(table.value, DaskInput)
    shares = zero_counts_shares if on_workers else zero_shares
    zeros = shares(
        table.value,
        use_columns=params.use_columns,
        sensitive_zeros=params.sensitive_zeros,
        record_limit=params.record_limit,
    )
    if zeros and on_workers and run.dirs.state().get("fingerprint") is None:
        # the CLI's pre-flight read only the column names: the terminal gets the warning it
        # prints for a local release (same text), once (not again on resume)
        progress.warning(zero_warning(zeros))
    core = prepare_params(params, dp_edges, table.value.column_names)
    prepared: PreparedTable | DaskBackend
    if isinstance(table.value, DaskInput):  # on the workers; the driver merges labels only
        prepared = session_backend(params, prepare_parts(table.value, core))
        fp = fingerprint_parts(prepared)
    else:
        prepared = prepare(table.value, core)
        fp = fingerprint(prepared)
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
