"""The budget dashboard in Prefect: a table artifact ``budget-<dataset>`` and ``sds.budget.*``
events, sent after every release (finished or failed) and after ``sds budget set``.

The artifact key is stable, so the Artifacts page shows each dataset's latest budget; the events
let an automation (``deployments/automations.yaml``) notify when little budget is left.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from prefect.artifacts import create_table_artifact
from prefect.events import emit_event

from sds_release.store.ledger.book import Ledger
from sds_release.store.ledger.budget_view import (
    ALERT_SHARE_DEFAULT,
    ALERT_SHARE_VARIABLE,
    BudgetView,
    artifact_key,
    check_share,
)

__all__ = ["BUDGET_LOW_EVENT", "BUDGET_UPDATED_EVENT", "alert_share", "show_budget"]

BUDGET_UPDATED_EVENT = "sds.budget.updated"
"""Emitted with every dashboard update; resource ``sds.dataset.<dataset>``."""

BUDGET_LOW_EVENT = "sds.budget.low"
"""Emitted when the remaining share of the lifetime budget is below the alert share."""


def alert_share() -> float:
    """The alert share: the Prefect variable ``sds_budget_alert_share``, else 0.2."""
    from prefect.variables import Variable

    value = Variable.get(ALERT_SHARE_VARIABLE, default=None)
    if value is None:
        return ALERT_SHARE_DEFAULT
    return check_share(value, source=f"the Prefect variable {ALERT_SHARE_VARIABLE!r}")


def show_budget(
    home: str | Path,
    dataset: str,
    *,
    ledger_url: str | None = None,
    logger: logging.Logger | None = None,
) -> None:
    """Publish the dataset's budget table artifact and its events (nothing if it has no budget).

    The numbers are the ledger's public accounting, never a count of the sensitive data.
    """
    view = BudgetView.load(Ledger.open(home, ledger_url), dataset)
    if view is None:
        return
    key = artifact_key("budget", dataset)
    _table_artifact(key, view.rows(), view.description())
    resource = {"prefect.resource.id": f"sds.dataset.{dataset}", "prefect.resource.name": dataset}
    payload = view.payload()
    emit_event(BUDGET_UPDATED_EVENT, resource=resource, payload=payload)
    share = alert_share()
    low = view.remaining_share < share
    if low:
        emit_event(BUDGET_LOW_EVENT, resource=resource, payload=payload | {"alert_share": share})
    if logger is not None and view.status.per_period:
        s = view.status
        logger.log(
            logging.WARNING if low else logging.INFO,
            "budget of dataset %s: %s; %d period(s) released%s; table artifact %r",
            dataset,
            s.describe_budget(),
            len(s.periods),
            ""
            if s.epsilon_cap_remaining is None
            else f", ε {s.epsilon_cap_remaining:.6g} of the cap left ({view.remaining_share:.0%}"
            + (f", below the alert share {share:.0%})" if low else ")"),
            key,
        )
    elif logger is not None:
        logger.log(
            logging.WARNING if low else logging.INFO,
            "budget of dataset %s: ε %.6g of %.6g left (%.0f%%%s); table artifact %r",
            dataset,
            view.status.epsilon_remaining,
            view.status.epsilon_lifetime,
            100 * view.remaining_share,
            f", below the alert share {share:.0%}" if low else "",
            key,
        )


def _table_artifact(key: str, rows: list[dict[str, str]], description: str) -> None:
    """A table artifact: linked to the current run, or (``sds budget set``) to none."""
    from prefect.context import get_run_context
    from prefect.exceptions import MissingContextError

    try:
        get_run_context()
    except MissingContextError:  # Prefect deprecates its helper outside runs: use the client
        from prefect.client.orchestration import get_client
        from prefect.client.schemas.actions import ArtifactCreate

        with get_client(sync_client=True) as client:
            client.create_artifact(
                ArtifactCreate(
                    key=key, type="table", data=json.dumps(rows), description=description
                )
            )
        return
    create_table_artifact(key=key, table=rows, description=description)
