"""Relative periods (release_store.config.periods): ``previous-month`` is resolved once, from the
run's scheduled start, before anything is reserved; a concrete period is left alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from release_store.config import build_params
from release_store.config.periods import previous_month, resolve_period


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
