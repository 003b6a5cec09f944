"""The ``budget`` task: reserve the release's whole (ε, δ) before anything reads the data."""

from __future__ import annotations

from prefect import task

from sds_release.store.config.core_objects import declared_sizes
from sds_release.store.config.planned import check_synthesis_sizes
from sds_release.store.config.release_params import ReleaseParams
from sds_release.store.ledger.book import Ledger
from sds_release.store.run import progress, stages
from sds_release.store.run.release_run import ReleaseRun, reserve
from sds_release.tasks.options import SENSITIVE, task_logger


@task(name=stages.BUDGET, **SENSITIVE)
def reserve_budget(params: ReleaseParams, flow_run_id: str | None = None) -> ReleaseRun:
    """Reserve the release's (ε, δ) in the ledger; refuse when it does not fit the budget, or
    when a schema that bounds every column's values says the synthesis cannot fit."""
    progress.stage("reserving the privacy budget")
    declared = declared_sizes(params)
    if declared is not None:  # the schema bounds every column: the synthesis is sized now
        check_synthesis_sizes(params, *declared)
    run = reserve(params, flow_run_id)
    left = Ledger.open(run.home, run.params.ledger).budget(run.dataset)  # never a replay
    task_logger().info(
        "budget: reserved ε=%.6g δ=%.3g for release %s of dataset %s before reading the data%s",
        run.epsilon,
        run.delta,
        run.release_id,
        run.dataset,
        ""
        if left is None
        else f"; the dataset has ε {left.epsilon_remaining:.6g} of {left.epsilon_lifetime:.6g} "
        "left beyond it",
    )
    return run
