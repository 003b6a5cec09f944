"""The series table: a row per combination and period a release could report, suppressed (never 0)
where it did not, nothing beyond a release's reporting length or columns; the changes between
consecutive periods against their combined noise."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from sds_release.store.series.sources import series_sources
from sds_release.store.series.table import SERIES_COLUMNS, changes, series_frame
from sds_release.store.workspace.encoding import HALF_WIDTH_COLUMN
from tests.store.series.conftest import MakeRelease

AUG, SEP, OCT = "2026-08", "2026-09", "2026-10"


def _rows(frame: pd.DataFrame) -> dict[tuple[str, str], tuple[object, object, bool]]:
    return {
        (p, c): (None if pd.isna(n) else int(n), None if pd.isna(h) else float(h), bool(s))
        for p, c, n, h, s in zip(
            frame["period"],
            frame["combination"],
            frame["count"],
            frame[HALF_WIDTH_COLUMN],
            frame["suppressed"],
            strict=True,
        )
    }


def test_a_combination_missing_in_a_period_is_suppressed_not_zero(
    make_release: MakeRelease, home: Path
) -> None:
    """sex:1 is reported in August and October only: September has a suppressed row with no
    count and no interval; each count keeps its own period's half-width; length 0 is the DP
    record count with its Laplace half-width."""
    make_release("r-aug", {"sex:0": 50, "sex:1": 40, "age:30;sex:0": 20}, period=AUG, rows=90)
    make_release("r-sep", {"sex:0": 55, "age:30;sex:0": 22}, period=SEP, rows=60,
                 hw={1: 12.0, 2: 8.0})  # fmt: skip
    make_release("r-oct", {"sex:0": 52, "sex:1": 41}, period=OCT, rows=95)
    frame, scopes = series_frame(series_sources(home, "d").releases)
    assert list(frame.columns) == [*SERIES_COLUMNS, "sex", "age"]
    rows = _rows(frame)
    laplace = round(10.0 * math.log(20.0), 6)
    assert rows == {
        (AUG, ""): (90, laplace, False),
        (SEP, ""): (60, laplace, False),
        (OCT, ""): (95, laplace, False),
        (AUG, "sex:0"): (50, 10.0, False),
        (SEP, "sex:0"): (55, 12.0, False),
        (OCT, "sex:0"): (52, 10.0, False),
        (AUG, "sex:1"): (40, 10.0, False),
        (SEP, "sex:1"): (None, None, True),
        (OCT, "sex:1"): (41, 10.0, False),
        (AUG, "age:30;sex:0"): (20, 7.0, False),
        (SEP, "age:30;sex:0"): (22, 8.0, False),
        (OCT, "age:30;sex:0"): (None, None, True),
    }
    assert not (frame["count"] == 0).any()
    assert frame.loc[frame["combination"] == "age:30;sex:0", "age"].tolist() == ["30"] * 3
    assert [s.reporting_length for s in scopes] == [2, 2, 2]


def test_nothing_is_suppressed_beyond_a_release_s_reach(
    make_release: MakeRelease, home: Path
) -> None:
    """A pair is not in the series for a period released with reporting length 1, and a value
    of a column that period did not release is not either: no row, not a suppressed one."""
    make_release("r-aug", {"sex:0": 50, "age:30": 30, "age:30;sex:0": 20}, period=AUG)
    short = make_release("r-sep", {"sex:0": 55}, period=SEP, reporting_length=1, hw={1: 10.0})
    assert short.is_dir()
    frame, _ = series_frame(series_sources(home, "d").releases)
    rows = _rows(frame)
    assert (SEP, "age:30;sex:0") not in rows
    assert rows[(SEP, "age:30")] == (None, None, True)  # age is a column of September too


def test_changes_beyond_the_combined_noise(make_release: MakeRelease, home: Path) -> None:
    """A change is marked when |b - a| > sqrt(h_a² + h_b²); a suppressed period breaks the
    chain (no change is computed across it)."""
    make_release("r-aug", {"sex:0": 50, "sex:1": 40}, period=AUG)
    make_release("r-sep", {"sex:0": 62, "sex:1": 60}, period=SEP)  # +12 within, +20 beyond
    make_release("r-oct", {"sex:0": 30}, period=OCT)  # -32 beyond; sex:1 suppressed
    found = series_sources(home, "d")
    frame, _ = series_frame(found.releases)
    out = changes(frame, [r.period for r in found.releases])
    got = {
        (c, a, b): (d, round(h, 3), e)
        for c, a, b, d, h, e in zip(
            out["combination"],
            out["period_from"],
            out["period_to"],
            out["change"],
            out["noise_half_width_95_combined"],
            out["exceeds_noise"],
            strict=True,
        )
        if c
    }
    combined = round(math.sqrt(200.0), 3)  # two half-widths of 10
    assert got == {
        ("sex:0", AUG, SEP): (12, combined, False),
        ("sex:0", SEP, OCT): (-32, combined, True),
        ("sex:1", AUG, SEP): (20, combined, True),
    }
