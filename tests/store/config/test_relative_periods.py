"""Relative periods (sds_release.store.config.periods): ``previous-month`` is resolved once, before
anything is reserved: a deployment's run from its schedule slot (issue #37: never from a time
the run's creator chose), another run from now; a concrete period is left alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from sds_core.errors import SdsInputError
from sds_release.store.config import build_params
from sds_release.store.config.periods import RunSlot, period_of_run, previous_month, resolve_period


@pytest.mark.parametrize(
    ("when", "month"),
    [
        (datetime(2026, 11, 1, 3, 0, tzinfo=UTC), "2026-10"),
        (datetime(2027, 1, 1, 0, 0, tzinfo=UTC), "2026-12"),
        (datetime(2026, 3, 31, 23, 59, tzinfo=UTC), "2026-02"),
        # 2026-11-01 00:30 at UTC+2 is 2026-10-31 22:30 UTC: the month before is September
        (datetime(2026, 11, 1, 0, 30, tzinfo=timezone(timedelta(hours=2))), "2026-09"),
    ],
)
def test_previous_month_is_the_month_before_in_utc(when: datetime, month: str) -> None:
    """The month before the given time, counted in UTC, written YYYY-MM."""
    assert previous_month(when) == month


def test_resolve_period_replaces_only_the_rule() -> None:
    """`previous-month` becomes a concrete month; a concrete period and no period stay."""
    base = {"input": "x", "dataset": "d", "period_column": "month"}
    when = datetime(2026, 11, 1, 3, 0, tzinfo=UTC)
    rule = build_params({}, {**base, "period": "previous-month"})
    assert resolve_period(rule, when).period == "2026-10"
    concrete = build_params({}, {**base, "period": "2026-07"})
    assert resolve_period(concrete, when) is concrete
    plain = build_params({}, {"input": "x", "dataset": "d"})
    assert resolve_period(plain, when) is plain


SLOT = datetime(2026, 11, 1, 3, 0, tzinfo=UTC)
DEPLOYED = datetime(2026, 1, 5, tzinfo=UTC)


def _slot(**changes: object) -> RunSlot:
    """A run the monthly schedule made for its slot of 2026-11-01 03:00 UTC."""
    base = {
        "deployment": "monthly-release",
        "auto_scheduled": True,
        "slot": SLOT,
        "is_slot": True,
        "deployed_at": DEPLOYED,
    }
    return RunSlot(**{**base, **changes})  # type: ignore[arg-type]


def test_a_scheduled_run_takes_the_period_of_its_slot_whenever_it_runs() -> None:
    """The schedule's run of 2026-11-01 releases October, also when it runs late (a worker that
    was down for two months); a run outside deployments resolves from now."""
    rule = build_params({}, {"input": "x", "dataset": "d", "period_column": "m",
                             "period": "previous-month"})  # fmt: skip
    late = datetime(2027, 1, 3, tzinfo=UTC)
    assert period_of_run(rule, _slot(), late).period == "2026-10"
    assert period_of_run(rule, _slot(), SLOT - timedelta(minutes=5)).period == "2026-10"
    assert period_of_run(rule, None, late).period == "2026-12"
    concrete = build_params({}, {"input": "x", "dataset": "d", "period_column": "m",
                                 "period": "2026-07"})  # fmt: skip
    assert period_of_run(concrete, _slot(auto_scheduled=False), late) is concrete


@pytest.mark.parametrize(
    ("changes", "now", "why"),
    [
        ({"auto_scheduled": False}, SLOT, r"made by hand .* not by the deployment's schedule"),
        ({"slot": None}, SLOT, "made by hand"),
        ({"is_slot": False}, SLOT, r"2026-11-01T03:00:00\+00:00 is none of the deployment's"),
        ({"deployed_at": datetime(2026, 12, 1, tzinfo=UTC)}, SLOT, r"before the deployment was"),
        ({}, SLOT - timedelta(days=3), r"before its slot 2026-11-01T03:00:00\+00:00"),
    ],
    ids=["by-hand", "no-slot", "not-a-slot", "backfill", "started-early"],
)
def test_a_run_the_schedule_did_not_make_at_its_slot_releases_nothing(
    changes: dict, now: datetime, why: str
) -> None:
    """A run made by hand, at a time that is no slot, at a slot before the deployment existed,
    or started before its slot: refused, saying why and how to release a period by hand."""
    rule = build_params({}, {"input": "x", "dataset": "d", "period_column": "m",
                             "period": "previous-month"})  # fmt: skip
    with pytest.raises(
        SdsInputError,
        match=rf"'previous-month' of deployment 'monthly-release'.*{why}.*releases nothing"
        r".*sds release --period YYYY-MM",
    ):
        period_of_run(rule, _slot(**changes), now)
