"""The guarantee fuzz test's deployments (tests/flows/test_guarantee_fuzz.py): two per home on
the session's Prefect test server, pinned as ``sds deploy`` pins them, and flow runs of them made
through the API at any scheduled time, by hand or by the server's scheduler.

What the model allows a run of a pinned ``previous-month`` (:func:`allowed_months`): the month
before now, or the month before its schedule slot when the schedule made it for a slot that
has come (issue #37 item 4: never a month its creator chose).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

from tests.guarantee_model import MONTHLY, TINY, World, previous_month_of

WHEN = ("now", "past", "future", "long ago", "backfill", "next")
"""A run's scheduled time: made by hand for now, a day of a month of the data, a future day or
a year ago; or made by the schedule for the slots of a past month (a backfill) or its next
slots."""
EARLY = timedelta(minutes=15)
"""How early before its slot a scheduled run may start."""


@dataclass(frozen=True, slots=True)
class Deployment:
    """A deployment of the fuzz: its id, when it was created, and whether it pins a relative
    period."""

    id: UUID
    created: datetime
    relative: bool


def deploy(home: Path, world: World) -> dict[str, Deployment]:
    """The deployments of ``home``: ``monthly`` pinning ``period = "previous-month"`` (a monthly
    cron, and a schedule every 10 minutes whose next slot is a legitimate run of now), and
    ``tiny`` (no period, no schedule)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import DeploymentScheduleCreate
    from prefect.client.schemas.schedules import CronSchedule, IntervalSchedule

    from sds_release.store.config.deployment import pin_path, write_pins

    every = IntervalSchedule(
        interval=timedelta(minutes=10), anchor_date=datetime(2026, 1, 1, tzinfo=UTC)
    )
    schedules = [
        DeploymentScheduleCreate(schedule=CronSchedule(cron="0 3 1 * *", timezone="UTC")),
        DeploymentScheduleCreate(schedule=every),
    ]
    made = {}
    with get_client(sync_client=True) as client:
        flow_id = client.create_flow_from_name("sds-release")
        for dataset, pins, schedule in (
            (MONTHLY, {"period": "previous-month"}, schedules),
            (TINY, {}, []),
        ):
            name = f"fuzz-{dataset}-{home.name.replace('_', '-').lower()}"
            pinned = {"input": str(world.data(dataset)), "config": str(world.configs[dataset])}
            write_pins(pin_path(home, name), {**pinned, **pins}, "the guarantee fuzz test")
            deployment = client.create_deployment(
                flow_id=flow_id,
                name=name,
                entrypoint="sds_release/flows/deployed.py:deployed_release",
                schedules=schedule,
            )
            created = client.read_deployment(deployment).created or datetime.now(UTC)
            made[dataset] = Deployment(deployment, created, bool(pins))
    return made


def flow_run(
    deployment: Deployment,
    when: str,
    parameters: dict[str, Any],
    rng: random.Random,
    months: tuple[str, ...],
) -> tuple[Any, datetime | None]:
    """A flow run of ``deployment`` with ``parameters`` and its scheduled time: made by hand at
    a time of ``when`` (a day of one of ``months`` for ``past``), or by the server's scheduler
    (``backfill``, ``next``: a run it made, at random). A run scheduled later is moved to now
    (its expected start stays), as when its time has come: the engine would wait for it."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterId,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.states import Scheduled

    now = datetime.now(UTC)
    with get_client(sync_client=True) as client:
        run = None
        if when in ("backfill", "next") and deployment.relative:
            window = (
                {"start_time": f"{rng.choice(months)}-01T00:00:00Z",
                 "end_time": f"{months[-1]}-01T04:00:00Z"}
                if when == "backfill"
                else {"start_time": now.isoformat()}
            )  # fmt: skip
            client._client.post(
                f"/deployments/{deployment.id}/schedule",
                json={**window, "min_runs": 1, "max_runs": 3},
            )
            waiting = client.read_flow_runs(
                deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment.id])),
                flow_run_filter=FlowRunFilter(
                    state=FlowRunFilterState(
                        type=FlowRunFilterStateType(any_=[StateType.SCHEDULED])
                    )
                ),
            )
            made = sorted((r for r in waiting if r.auto_scheduled), key=lambda r: str(r.id))
            if made:
                run = rng.choice(made)
                client.update_flow_run(run.id, parameters={"options": parameters})
        if run is None:
            at = {
                "now": now,
                "future": now + timedelta(days=rng.randrange(20, 70)),
                "long ago": now - timedelta(days=400),
            }.get(when)
            if at is None:
                at = datetime.fromisoformat(f"{rng.choice(months)}-{rng.randrange(1, 29):02d}")
                at = at.replace(hour=3, tzinfo=UTC)
            run = client.create_flow_run_from_deployment(
                deployment.id,
                parameters={"options": parameters},
                state=Scheduled(scheduled_time=at),
            )
        slot = run.expected_start_time
        if slot is not None and slot > now:
            client.set_flow_run_state(run.id, Scheduled(scheduled_time=now), force=True)
        return client.read_flow_run(run.id), slot


def allowed_months(
    deployment: Deployment, run: Any, slot: datetime | None
) -> frozenset[str] | None:
    """The months a run of a ``previous-month`` deployment may release (None: a deployment of
    no relative period): the month before now (a run resolved from now), and the month before
    its slot if the schedule made it for a slot since the deployment that has come."""
    if not deployment.relative:
        return None
    now = datetime.now(UTC)
    allowed = {previous_month_of(now)}
    if run.auto_scheduled and slot is not None and deployment.created <= slot <= now + EARLY:
        allowed.add(previous_month_of(slot))
    return frozenset(allowed)
