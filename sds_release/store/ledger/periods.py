"""Period labels: the formats a per-period dataset's periods are written in, and one spelling each.

A dataset whose budget is per period pays each period from its own budget, found by the period's
label. So a period has one label: the canonical text of its format (``2026-10`` for YYYY-MM,
never ``2026-10 `` or ``2026-1``). The format is recorded with the budget (``sds budget set
--per-period --period-format F``) and declared by the release config (``period_format``);
``ReleaseParams`` refuses a label that is not canonical, the ledger refuses it again when it
reserves, and the row filter (:mod:`sds_release.store.inputs.periods`) reads the period column's
cells in the same format. Stdlib only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date
from typing import Literal

from sds_core.errors import SdsInputError

__all__ = [
    "DEFAULT_PERIOD_FORMAT",
    "EXAMPLES",
    "PERIOD_FORMATS",
    "PeriodFormat",
    "check_format_change",
    "check_period",
    "date_key",
    "label_problem",
    "period_key",
]

PeriodFormat = Literal["YYYY-MM", "YYYY-Qn", "YYYY", "YYYY-MM-DD"]
"""How a dataset's periods are written: a month, a quarter, a year or a day."""

PERIOD_FORMATS: tuple[PeriodFormat, ...] = ("YYYY-MM", "YYYY-Qn", "YYYY", "YYYY-MM-DD")

DEFAULT_PERIOD_FORMAT: PeriodFormat = "YYYY-MM"
"""The format of a dataset that declares none (and of every budget recorded before formats)."""

EXAMPLES: dict[str, str] = {
    "YYYY-MM": "2026-10",
    "YYYY-Qn": "2026-Q4",
    "YYYY": "2026",
    "YYYY-MM-DD": "2026-10-31",
}

_TEXT = {
    "YYYY-MM": re.compile(r"(\d{4})-(\d{2})"),
    "YYYY-Qn": re.compile(r"(\d{4})-Q([1-4])"),
    "YYYY": re.compile(r"(\d{4})"),
    "YYYY-MM-DD": re.compile(r"(\d{4})-(\d{2})-(\d{2})"),
}
_DIGITS = {  # the integer spelling of a period in a Parquet integer column (202610)
    "YYYY-MM": re.compile(r"(\d{4})(\d{2})"),
    "YYYY": re.compile(r"(\d{4})"),
    "YYYY-MM-DD": re.compile(r"(\d{4})(\d{2})(\d{2})"),
}


def _key(fmt: str, year: int, month: int = 1, day: int = 1, quarter: int = 1) -> int | None:
    """The period's number (ordered as the periods), or None when it is no calendar period."""
    if year < 1:
        return None
    if fmt == "YYYY":
        return year
    if fmt == "YYYY-Qn":
        return year * 10 + quarter
    if not 1 <= month <= 12:
        return None
    if fmt == "YYYY-MM":
        return year * 100 + month
    try:
        date(year, month, day)
    except ValueError:
        return None
    return year * 10_000 + month * 100 + day


def period_key(label: str, fmt: str, *, digits: bool = False) -> int | None:
    """The number of the period ``label`` names in ``fmt``, or None when ``label`` is not its
    canonical text (``digits``: the integer spelling of a Parquet integer column, 202610).

    >>> period_key("2026-10", "YYYY-MM"), period_key("2026-10 ", "YYYY-MM")
    (202610, None)
    >>> period_key("2026-Q4", "YYYY-Qn"), period_key("202610", "YYYY-MM", digits=True)
    (20264, 202610)
    """
    pattern = (_DIGITS if digits else _TEXT).get(fmt)
    found = None if pattern is None else pattern.fullmatch(label)
    if found is None or not label.isascii():
        return None
    parts = [int(p) for p in found.groups()]
    if fmt == "YYYY-Qn":
        return _key(fmt, parts[0], quarter=parts[1])
    return _key(fmt, *parts)


def date_key(fmt: str, year: int, month: int, day: int) -> int:
    """The number of the period in ``fmt`` holding the date (a Parquet date column's cell).

    >>> date_key("YYYY-Qn", 2026, 11, 5) == period_key("2026-Q4", "YYYY-Qn")
    True
    """
    key = _key(fmt, year, month, day, (month - 1) // 3 + 1)
    if key is None:  # a date's parts always make a period
        raise ValueError(f"no period of {year}-{month}-{day}")
    return key


def label_problem(label: str, fmt: str) -> str | None:
    """Why ``label`` is not the canonical text of a period in ``fmt`` (None: it is)."""
    if period_key(label, fmt) is not None:
        return None
    example = EXAMPLES[fmt]
    if label != label.strip():
        return (
            f"period {label!r} has leading or trailing whitespace; a period is written exactly "
            f"in its format {fmt} (e.g. {example}), so that one period has one budget: remove "
            "the spaces"
        )
    fitting = [f for f in PERIOD_FORMATS if f != fmt and period_key(label, f) is not None]
    other = f", or declare the dataset's periods as {fitting[0]} (period_format)" if fitting else ""
    return (
        f"period {label!r} is not a period written {fmt} (e.g. {example}): a period has one "
        f"spelling, so that one period has one budget; write it as {fmt}{other}"
    )


def check_period(label: str, fmt: str) -> str:
    """``label`` when it is the canonical text of a period in ``fmt``.

    Raises:
        SdsInputError: it is not (whitespace, another format, no such month or day).
    """
    problem = label_problem(label, fmt)
    if problem is not None:
        raise SdsInputError(problem)
    return label


def check_format_change(dataset: str, periods: Iterable[str | None], fmt: str) -> None:
    """Refuse the period format ``fmt`` for ``dataset`` when a period it already reserved
    (``periods``; None: a release without a period) is not written in it: that period's budget
    would then be found under two spellings.

    Raises:
        SdsInputError: names the periods and the two ways out.
    """
    other = sorted(p for p in periods if p is not None and label_problem(p, fmt) is not None)
    if other:
        raise SdsInputError(
            f"--period-format {fmt}: dataset {dataset!r} has already reserved period(s) "
            f"{other[:3]} that are not written {fmt}, and each period has one spelling; keep "
            "the format its periods are written in (leave out --period-format), or release "
            "the periods in the new format under a new dataset id"
        )
