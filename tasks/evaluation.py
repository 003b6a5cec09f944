"""The ``evaluate`` task: utility and risk metrics (computed from the sensitive data, not DP).

The full evaluation stays in the private checkpoint; only its publishable subset (rounded
ratios) reaches the release files.
"""

from __future__ import annotations

from typing import Any

from prefect import task

from release_store import progress, stages
from release_store.run import ReleaseRun, SensitiveTable
from release_store.stage_log import finished, stage_done
from sds_core.data.table import PreparedTable
from sds_core.evaluation.metrics import evaluate_release
from sds_core.evaluation.params import EvaluationParams
from sds_core.marginals.aggregates import AggregateSet
from tasks.options import SENSITIVE, task_logger


@task(name=stages.EVALUATE, **SENSITIVE)
def evaluate(
    run: ReleaseRun,
    table: SensitiveTable[PreparedTable],
    aggregates: AggregateSet,
    synthetic: PreparedTable,
) -> dict[str, Any]:
    """Metrics of the synthetic records and DP aggregates against the sensitive table."""
    progress.stage("evaluate")
    params = EvaluationParams(
        reporting_length=run.params.reporting_length, resolution=run.params.resolution
    )
    resumed = finished(run, stages.EVALUATE)
    result = run.stage(
        stages.EVALUATE, lambda: evaluate_release(table.value, synthetic, aggregates, params)
    )
    stage_done(
        task_logger(),
        run,
        stages.EVALUATE,
        "utility and risk metrics computed from the sensitive data (NOT DP: kept in the private "
        "workspace; evaluation.json publishes rounded ratios only)",
        resumed=resumed,
    )
    return result
