"""The schedule slot of a deployment's flow run, read from the Prefect API.

A relative period (``previous-month``) of a deployed run is the period of its schedule slot
(:func:`sds_release.store.config.periods.period_of_run`). The run's own scheduled start is no
slot: whoever creates a run (UI, API, ``prefect deployment run --start-at``) chooses it. What
the server records about the run is: whether its scheduler made it (``auto_scheduled``), the
time it was made for (``expected_start_time``, never changed by later states) and the
deployment's schedules and creation time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from prefect import runtime

from sds_release.store.config.periods import RunSlot

__all__ = ["is_slot", "run_slot"]


def run_slot() -> RunSlot | None:
    """Who made the current flow run, if a deployment did (None: a run outside deployments,
    such as ``sds release``'s)."""
    from prefect.client.orchestration import get_client

    deployment_id = runtime.deployment.id
    if not deployment_id:
        return None
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(runtime.flow_run.id)
        deployment = client.read_deployment(deployment_id)
    slot = run.expected_start_time
    return RunSlot(
        deployment=deployment.name,
        auto_scheduled=bool(run.auto_scheduled),
        slot=slot,
        is_slot=slot is not None and any(is_slot(s.schedule, slot) for s in deployment.schedules),
        deployed_at=deployment.created,
    )


def is_slot(schedule: Any, when: datetime) -> bool:
    """``when`` is one of the times of ``schedule`` (a deployment's cron, interval or rrule
    schedule), computed as the server's scheduler computes them."""
    from prefect.server.schemas import schedules as server
    from prefect.utilities.asyncutils import run_coro_as_sync

    kinds: dict[str, Any] = {
        "CronSchedule": server.CronSchedule,
        "IntervalSchedule": server.IntervalSchedule,
        "RRuleSchedule": server.RRuleSchedule,
    }
    kind = kinds.get(type(schedule).__name__)
    if kind is None:
        return False
    own = kind.model_validate(schedule.model_dump())
    times: list[datetime] = run_coro_as_sync(own.get_dates(n=1, start=when)) or []
    return bool(times) and times[0] == when
