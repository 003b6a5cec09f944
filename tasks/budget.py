"""The ``budget`` task: reserve the release's whole (ε, δ) before anything reads the data."""

from __future__ import annotations

from prefect import get_run_logger, task

from release_store import progress, stages
from release_store.params import ReleaseParams
from release_store.run import ReleaseRun, reserve
from tasks.options import SENSITIVE


@task(name=stages.BUDGET, **SENSITIVE)
def reserve_budget(params: ReleaseParams, flow_run_id: str | None = None) -> ReleaseRun:
    """Reserve the release's (ε, δ) in the ledger; refuse when it does not fit the budget."""
    progress.stage("reserving the privacy budget")
    run = reserve(params, flow_run_id)
    get_run_logger().info(
        "reserved ε=%s δ=%.3g for release %s", run.epsilon, run.delta, run.release_id
    )
    return run
