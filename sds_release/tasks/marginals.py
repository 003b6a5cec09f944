"""The DP marginals tasks: ``count``, ``aggregate-k`` and ``normalize`` (sds_core.marginals).

Each noisy stage is charged, then drawn from the release key, then checkpointed privately
(``ReleaseRun.stage``); the tasks return only DP values, which the flow passes on explicitly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prefect import task

from sds_core.marginals import engine
from sds_core.marginals.aggregates import AggregateSet
from sds_core.marginals.plan import SdsPlan
from sds_release.store.config.core_objects import dp_params
from sds_release.store.config.planned import PLANNED_FIELDS, check_synthesis_sizes, planned_params
from sds_release.store.config.release_params import ReleaseParams
from sds_release.store.executor.base import Executor
from sds_release.store.run import progress, stages
from sds_release.store.run.claims import delta_detail
from sds_release.store.run.release_run import (
    ProtectedCount,
    ReleaseRun,
    SensitiveTable,
    planned_charges,
)
from sds_release.store.run.results import LengthResult, PlannedRelease
from sds_release.store.run.stage_log import by_length_text, finished, stage_done
from sds_release.tasks.options import SENSITIVE, task_logger


@task(name=stages.COUNT, **SENSITIVE)
def count_records(
    run: ReleaseRun, table: SensitiveTable[Any], executor: Executor[Any, Any]
) -> ProtectedCount:
    """The DP (Laplace) record count: charged, then drawn; returns only the protected count."""
    progress.stage("count (DP record count)")
    resumed = finished(run, stages.COUNT)
    if not resumed:  # refused before the first charge: the samplers' part of δ must fit
        delta_detail(run.params, table.value.domain.n_columns)
    if not resumed:  # the synthesis's sizes, whatever the plan picks, before the first charge
        domain = table.value.domain
        check_synthesis_sizes(run.params, domain.columns, domain.cardinalities)

    def compute() -> int:
        step = engine.protect_record_count(
            executor.counting_backend(table.value),
            dp_params(run.params),
            run.randomness(),
            release_label=run.release_id,
        )
        return int(step.protected_number_of_records)

    protected = ProtectedCount(int(run.stage(stages.COUNT, compute)))
    stage_done(
        task_logger(),
        run,
        stages.COUNT,
        f"DP record count m={protected.value} (discrete Laplace; the true count is never shown)",
        resumed=resumed,
    )
    return protected


@task(name=stages.PLAN, **SENSITIVE)
def plan_aggregation(
    run: ReleaseRun, table: SensitiveTable[Any], protected_n: ProtectedCount
) -> PlannedRelease:
    """The SDS plan from the DP record count: the parameters the release runs with from here
    (R, split, synthesis) and the plan for the manifest. Post-processing: nothing is charged
    or drawn; the ledger's not-yet-charged stages get the planned shares within the reserved
    total. The table is read for its number of columns only (public: the header's). The
    checkpoint keeps the plan as written (:meth:`~sds_core.marginals.plan.SdsPlan.as_dict`),
    and the plan handed on is read from it, fresh or resumed."""
    progress.stage("plan (R, split and synthesis from the DP record count)")
    resumed = finished(run, stages.PLAN)

    def compute() -> dict[str, Any]:
        planned, plan = planned_params(run.params, protected_n.value, table.value.domain.n_columns)
        return {
            "planned": {f: getattr(planned, f) for f in PLANNED_FIELDS},
            "plan": None if plan is None else plan.as_dict(),
        }

    done = run.stage(stages.PLAN, compute)
    planned = ReleaseParams.model_validate(run.params.model_dump() | done["planned"])
    if planned != run.params:  # the stages still to charge get the planned shares
        run.ledger().revise_plan(
            run.release_id, planned_charges(planned), flow_run_id=run.flow_run_id
        )
    plan = None if done["plan"] is None else SdsPlan.from_dict(done["plan"])
    stage_done(
        task_logger(),
        run,
        stages.PLAN,
        plan.reason if plan else "no SDS plan (a registry synthesizer)",
        resumed=resumed,
    )
    return PlannedRelease(planned, plan)


@task(name=stages.AGGREGATE, task_run_name="aggregate-{k}", **SENSITIVE)
def aggregate_length(
    run: ReleaseRun,
    table: SensitiveTable[Any],
    executor: Executor[Any, Any],
    k: int,
    protected_n: ProtectedCount,
    shorter: Mapping[int, LengthResult],
) -> LengthResult:
    """DP counts of the length-k combinations, given the DP results of lengths 1..k-1.

    Returns the survivors with their noisy counts, Δ_k, the threshold and (k = 1 with declared
    domains) the released domain: DP values only (the private notes stay in the checkpoint).
    """
    name = stages.aggregate_stage(k)
    progress.stage(f"{name} (DP combinations of length {k})")
    progress.advance(k - 1, run.params.length)
    resumed = finished(run, name)

    def compute() -> dict[str, Any]:
        dp = dp_params(run.params)
        step = engine.aggregate_length(
            executor.counting_backend(table.value),
            k,
            {j: shorter[j].survivors for j in range(1, k)},
            engine.plan_release(dp, protected_n.value),
            dp,
            run.randomness(),
            release_label=run.release_id,
            domain=shorter[1].domain if k > 1 else None,
        )
        return {
            "survivors": step.survivors,
            "allowed_sensitivity": step.allowed_sensitivity,
            "threshold": step.threshold,
            "domain": step.domain,
            "private_notes": dict(step.private_notes),
        }

    # aggregate-1's δ share pays the 1-tuple threshold and the samplers: its charge says how
    detail = delta_detail(run.params, table.value.domain.n_columns) if k == 1 else None
    done = run.stage(name, compute, detail=detail)
    progress.advance(k, run.params.length)
    stage_done(
        task_logger(),
        run,
        name,
        f"{len(done['survivors'])} DP combinations of length {k} survive the threshold "
        f"{done['threshold'] + 0.0:.4g} (per-record sensitivity "
        f"Δ_{k}={done['allowed_sensitivity']}, chosen by the DP percentile)",
        resumed=resumed,
    )
    return LengthResult.from_checkpoint(done)


@task(name=stages.NORMALIZE, **SENSITIVE)
def normalize_aggregates(
    run: ReleaseRun,
    table: SensitiveTable[Any],
    by_length: Mapping[int, LengthResult],
    protected_n: ProtectedCount,
) -> AggregateSet:
    """Round, add missing parents, normalize: the published DP ``AggregateSet``.

    Post-processing of DP values; the table is read only for its domain when no domain was
    released (undeclared columns: the domain of the published 1-tuples).
    """
    progress.stage("normalize")
    resumed = finished(run, stages.NORMALIZE)

    def compute() -> AggregateSet:
        return engine.finalize(
            {k: step.survivors for k, step in by_length.items()},
            domain=by_length[1].domain or table.value.domain,
            reporting_length=run.params.length,
            protected_number_of_records=protected_n.value,
        )

    aggregates = run.stage(stages.NORMALIZE, compute)
    published = {k: len(aggregates.counts_of(k)) for k in range(1, aggregates.reporting_length + 1)}
    stage_done(
        task_logger(),
        run,
        stages.NORMALIZE,
        f"{sum(published.values())} DP combinations to publish ({by_length_text(published)})",
        resumed=resumed,
    )
    return aggregates
