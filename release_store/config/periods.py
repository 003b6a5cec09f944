"""Relative periods: ``--period previous-month`` resolved once to the concrete period (``2026-10``).

A scheduled release (a monthly deployment, a cron job) cannot name next month's period in
advance; it names a rule instead. The rule is resolved before anything is reserved or read (the
CLI before its pre-flight, the ``release`` flow before its budget stage, from the run's scheduled
start), so the ledger, the private parameters (``sds resume``) and the manifest only ever hold the
concrete period.
"""

from __future__ import annotations

from datetime import UTC, datetime

from release_store.config.release_params import ReleaseParams

__all__ = ["RELATIVE_PERIODS", "previous_month", "resolve_period"]


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


def resolve_period(params: ReleaseParams, when: datetime | None = None) -> ReleaseParams:
    """``params`` with a relative ``period`` replaced by the period it names at ``when`` (the
    run's scheduled start; default now, UTC); any other ``params`` unchanged."""
    rule = RELATIVE_PERIODS.get(params.period or "")
    if rule is None:
        return params
    return params.model_copy(update={"period": rule(when or datetime.now(UTC))})
