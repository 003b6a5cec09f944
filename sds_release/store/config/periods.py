"""Relative periods: ``--period previous-month`` resolved once to the concrete period (``2026-10``).

A scheduled release (a monthly deployment, a cron job) cannot name next month's period in
advance; it names a rule instead. The rule is resolved before anything is reserved or read (the
CLI before its pre-flight, from now; the ``release`` flow before its budget stage), so the
ledger, the private parameters (``sds resume``) and the manifest only ever hold the concrete
period. A deployment's run takes it from its schedule slot (:func:`period_of_run`), never from a
time the run's creator chose: a run the schedule did not make releases nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sds_core.errors import SdsInputError
from sds_release.store.config.release_params import ReleaseParams

__all__ = [
    "EARLY_START",
    "RELATIVE_PERIODS",
    "RunSlot",
    "period_of_run",
    "previous_month",
    "resolve_period",
]


def previous_month(when: datetime) -> str:
    """The month before ``when`` (in UTC) as ``YYYY-MM``.

    >>> previous_month(datetime(2027, 1, 1, 3, 0, tzinfo=UTC))
    '2026-12'
    """
    utc = when.astimezone(UTC) if when.tzinfo is not None else when
    year, month = (utc.year, utc.month - 1) if utc.month > 1 else (utc.year - 1, 12)
    return f"{year:04d}-{month:02d}"


RELATIVE_PERIODS = {"previous-month": previous_month}
"""The rules ``period`` may name instead of a period, and how each is resolved (periods written
``YYYY-MM`` in the period column)."""

EARLY_START = timedelta(minutes=15)
"""How long before its slot a scheduled run may start (a worker submits runs a little early)."""


def resolve_period(params: ReleaseParams, when: datetime | None = None) -> ReleaseParams:
    """``params`` with a relative ``period`` replaced by the period it names at ``when`` (default
    now, UTC); any other ``params`` unchanged."""
    rule = RELATIVE_PERIODS.get(params.period or "")
    if rule is None:
        return params
    return params.model_copy(update={"period": rule(when or datetime.now(UTC))})


@dataclass(frozen=True, slots=True)
class RunSlot:
    """Who made a deployment's flow run and for which slot, as the server records it.

    Attributes:
        deployment: the deployment's name.
        auto_scheduled: the deployment's schedule made the run (the server's scheduler sets
            this; no API call of a user does).
        slot: the time the run was made for (its first expected start: the slot, for a run
            the schedule made; a user sets it freely on a run made by hand).
        is_slot: one of the deployment's schedules has ``slot`` as one of its times.
        deployed_at: when the deployment was created (the schedule had no slot before).
    """

    deployment: str
    auto_scheduled: bool
    slot: datetime | None
    is_slot: bool
    deployed_at: datetime | None

    def problem(self, now: datetime) -> str | None:
        """Why the run has no schedule slot to take its period from (None: it has one)."""
        if not self.auto_scheduled or self.slot is None:
            return (
                "this run was made by hand (the UI's Run, the API, `prefect deployment run`), "
                "not by the deployment's schedule, so it has no schedule slot"
            )
        if not self.is_slot:
            return f"its time {self.slot.isoformat()} is none of the deployment's schedule slots"
        if self.deployed_at is not None and self.slot < self.deployed_at:
            return (
                f"its slot {self.slot.isoformat()} is before the deployment was created "
                f"({self.deployed_at.isoformat()}): a backfill, which the schedule never made"
            )
        if now < self.slot - EARLY_START:
            return (
                f"it started at {now.isoformat(timespec='seconds')}, before its slot "
                f"{self.slot.isoformat()} (its period is not over yet)"
            )
        return None


def period_of_run(params: ReleaseParams, run: RunSlot | None, now: datetime) -> ReleaseParams:
    """``params`` with a relative ``period`` resolved for a flow run: at its schedule slot for a
    run of a deployment (``run``), at ``now`` for a run outside any deployment (the
    custodian's own process: ``sds release``, a script); any other ``params`` unchanged.

    Raises:
        SdsInputError: a deployment's run whose schedule did not make it at one of its slots
            (made by hand, a backfill before the deployment, started before its slot): it
            releases nothing, whatever time its creator gave it.
    """
    rule = RELATIVE_PERIODS.get(params.period or "")
    if rule is None:
        return params
    if run is None:
        return resolve_period(params, now)
    problem = run.problem(now)
    if problem is not None or run.slot is None:
        raise SdsInputError(
            f"period {params.period!r} of deployment {run.deployment!r} is the period of "
            f"the run's schedule slot, but {problem}; this run releases nothing, and nothing "
            "was read or charged. The schedule releases each period at its slot; to release "
            "a period by hand, the custodian runs `sds release --period YYYY-MM`"
        )
    return params.model_copy(update={"period": rule(run.slot)})
