"""The ``evaluate`` task: utility and risk metrics (computed from the sensitive data, not DP);
with ``privacy_risk``, anonymeter's attack-based risks too.

The evaluation stays private: its checkpoint, and the custodian report the publish stage writes
to the private workspace. No part of it reaches the release files.
"""

from __future__ import annotations

from typing import Any

from prefect import task

from sds_core.evaluation.params import EvaluationParams
from sds_core.evaluation.release import evaluate_release
from sds_core.marginals.aggregates import AggregateSet
from sds_release.store.compare.risk import release_risks
from sds_release.store.executor.base import Executor
from sds_release.store.run import progress, stages
from sds_release.store.run.release_run import ReleaseRun, SensitiveTable
from sds_release.store.run.stage_log import finished, stage_done
from sds_release.tasks.options import SENSITIVE, task_logger


@task(name=stages.EVALUATE, **SENSITIVE)
def evaluate(
    run: ReleaseRun,
    table: SensitiveTable[Any],
    aggregates: AggregateSet,
    synthetic: Any,
    executor: Executor[Any, Any],
    dp_edges: dict[str, list[float]] | None = None,
) -> dict[str, Any]:
    """Metrics of the synthetic records and DP aggregates against the sensitive table, each
    side reduced to sums where ``executor`` holds it
    (:func:`~sds_core.evaluation.release.evaluate_release`).

    With ``privacy_risk`` also anonymeter's risks (``privacy_risk``), from the training part,
    the held-back control rows (prepared with the release's ``dp_edges``) and the records (in
    this process: the parameters refuse ``privacy_risk`` with an executor that holds them
    elsewhere)."""
    progress.stage("evaluate")
    params = EvaluationParams(reporting_length=run.params.length, resolution=run.params.resolution)
    resumed = finished(run, stages.EVALUATE)
    original = table.value

    def compute() -> dict[str, Any]:
        metrics = evaluate_release(original, synthetic, aggregates, params)
        if run.params.privacy_risk:
            progress.stage("privacy risk (anonymeter)")
            metrics["privacy_risk"] = release_risks(
                run, executor.whole_table(original), executor.whole_table(synthetic), dp_edges
            )
        return metrics

    result = run.stage(stages.EVALUATE, compute)
    stage_done(
        task_logger(),
        run,
        stages.EVALUATE,
        "utility and risk metrics computed from the sensitive data (NOT DP: kept in the private "
        "workspace for the custodian report, never published)",
        resumed=resumed,
    )
    return result
