"""Who or what started the running flow: the command line, a deployment's schedule, or a run of a
deployment from the Prefect UI or API (:class:`~sds_release.store.audit.journal.RunOrigin`).

Read from the Prefect runtime of the flow run; a deployment's schedule is read from the server
(a failure to read it leaves the schedule out, never fails the run).
"""

from __future__ import annotations

import os
from typing import Any

from prefect import runtime

from sds_release.store.audit.journal import RunOrigin, user_at_host

__all__ = ["MOCKED", "run_origin"]

MOCKED = "PREFECT__RUNTIME__DEPLOYMENT__NAME"
"""Prefect's override of ``runtime.deployment.name`` (a test runs the deployed flow with it)."""


def _schedules(deployment_id: str) -> str | None:
    """The deployment's active schedules as text (``cron 0 2 1 * * (UTC)``), or None."""
    from prefect.client.orchestration import get_client

    try:
        with get_client(sync_client=True) as client:
            deployment = client.read_deployment(deployment_id)
        texts = []
        for s in deployment.schedules or []:
            sched: Any = s.schedule
            if getattr(sched, "cron", None):
                texts.append(f"cron {sched.cron} ({getattr(sched, 'timezone', None) or 'UTC'})")
            elif getattr(sched, "interval", None):
                texts.append(f"every {sched.interval}")
            elif getattr(sched, "rrule", None):
                texts.append(f"rrule {sched.rrule}")
        return "; ".join(texts) or None
    except Exception:  # the record is best effort: the run goes on without it
        return None


def run_origin() -> RunOrigin:
    """The origin of the flow run this is called in (``cli`` outside a deployment)."""
    from prefect.context import FlowRunContext

    flow_run_id = str(runtime.flow_run.id or "") or None
    name = runtime.flow_run.name or None
    ctx = FlowRunContext.get()
    flow_run = ctx.flow_run if ctx is not None else None
    deployment_id = getattr(flow_run, "deployment_id", None)
    # a flow run the context knows without a deployment is a command-line run: no need to ask
    # the server (runtime.deployment.name would); Prefect's runtime override is honoured
    local = flow_run is not None and deployment_id is None and MOCKED not in os.environ
    deployment = None if local else runtime.deployment.name
    if not deployment:
        return RunOrigin("cli", flow_run_id=flow_run_id, flow_run_name=name, user=user_at_host())
    scheduled = bool(getattr(flow_run, "auto_scheduled", False))
    return RunOrigin(
        "scheduled" if scheduled else "on-demand",
        deployment=str(deployment),
        schedule=_schedules(str(deployment_id)) if scheduled and deployment_id else None,
        flow_run_id=flow_run_id,
        flow_run_name=name,
        user=user_at_host(),
    )
