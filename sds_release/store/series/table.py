"""The series table: every published combination of a dataset's releases, period by period.

One row per combination and period whose release could have reported it (its length within
that release's reporting length, its columns among that release's columns): the DP count and
its 95% noise half-width from that release's ``aggregates.parquet``, or ``suppressed`` (no
count: the release did not report it) — never a 0. Length 0 is the DP record count (its
discrete-Laplace half-width). :func:`changes` compares consecutive periods: a change is marked
when it exceeds the combined 95% noise interval of its two counts. Post-processing of
published files only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sds_core.errors import SdsInputError
from sds_core.marginals.aggregates import TABLE_COLUMNS
from sds_release.store.series.sources import SeriesRelease
from sds_release.store.workspace.encoding import HALF_WIDTH_COLUMN, half_width_95

__all__ = [
    "CHANGE_COLUMNS",
    "SERIES_COLUMNS",
    "ReleaseScope",
    "changes",
    "release_scope",
    "series_frame",
]

SERIES_COLUMNS = (
    "period",
    "release_id",
    "length",
    "combination",
    "count",
    HALF_WIDTH_COLUMN,
    "suppressed",
)
"""``series.parquet``'s own columns, before one column per input column (its value or null)."""

CHANGE_COLUMNS = (
    "length",
    "combination",
    "period_from",
    "period_to",
    "count_from",
    "count_to",
    "change",
    "noise_half_width_95_combined",
    "exceeds_noise",
)
"""The columns of :func:`changes`."""


@dataclass(frozen=True, slots=True)
class ReleaseScope:
    """What one release of the series could report: its columns and reporting length, its DP
    record count and the 95% noise half-width of each length's counts (None: not described)."""

    columns: tuple[str, ...]
    reporting_length: int
    record_count: int
    record_count_hw: float | None
    half_width_by_len: dict[int, float | None]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (the page's metadata)."""
        return {
            "columns": list(self.columns),
            "reporting_length": self.reporting_length,
            "record_count": self.record_count,
            "record_count_hw": self.record_count_hw,
            "half_width_by_len": {str(k): v for k, v in sorted(self.half_width_by_len.items())},
        }


def _value_columns(frame: pd.DataFrame) -> tuple[str, ...]:
    own = {*TABLE_COLUMNS, HALF_WIDTH_COLUMN}
    return tuple(c for c in frame.columns if c not in own)


def _aggregates(release: SeriesRelease) -> pd.DataFrame:
    frame = pd.read_parquet(release.release_dir / "aggregates.parquet")
    missing = [c for c in TABLE_COLUMNS if c not in frame.columns]
    if missing:
        raise SdsInputError(
            f"release {release.release_id}: aggregates.parquet has no column(s) {missing}; "
            "it is not a release's aggregate table (`sds verify` checks the release)"
        )
    clash = sorted(set(_value_columns(frame)) & set(SERIES_COLUMNS))
    if clash:
        raise SdsInputError(
            f"release {release.release_id} has input column(s) {clash} named like the series "
            f"table's own columns {list(SERIES_COLUMNS)}; a series of this dataset cannot name "
            "them apart: rename the column(s) in the input of its next releases"
        )
    return frame


def release_scope(release: SeriesRelease, frame: pd.DataFrame) -> ReleaseScope:
    """The scope of ``release`` from its manifest and its ``aggregates.parquet`` (``frame``).

    The half-width of a length is its counts' :data:`HALF_WIDTH_COLUMN` (one value per length),
    else :func:`~sds_release.store.workspace.encoding.half_width_95` of the manifest's
    ``noise_sd`` of that length (a release published before the column existed), else None (a
    synthesizer that describes no per-length noise).
    """
    noise = (release.manifest.get("privacy") or {}).get("noise") or {}
    by_length = {int(e["length"]): e for e in noise.get("by_length") or []}
    lengths = set(frame["length"].astype(int).unique().tolist()) | set(by_length)
    recorded = (release.manifest.get("parameters") or {}).get("reporting_length")
    top = max(lengths) if lengths else int(recorded or 0)
    half: dict[int, float | None] = {}
    for k in range(1, top + 1):
        values = (
            frame.loc[frame["length"] == k, HALF_WIDTH_COLUMN].dropna().unique()
            if HALF_WIDTH_COLUMN in frame.columns
            else np.array([])
        )
        if len(values) > 1:
            raise SdsInputError(
                f"release {release.release_id}: the counts of length {k} carry {len(values)} "
                "different noise half-widths; a series takes one per length"
            )
        if len(values) == 1:
            half[k] = float(values[0])
        elif k in by_length and by_length[k].get("noise_sd") is not None:
            half[k] = float(half_width_95(float(by_length[k]["noise_sd"])))
        else:
            half[k] = None
    rc = noise.get("record_count")
    scale = rc.get("scale") if isinstance(rc, dict) else None
    return ReleaseScope(
        columns=_value_columns(frame),
        reporting_length=top,
        record_count=int((release.manifest.get("input") or {}).get("rows") or 0),
        record_count_hw=None if scale is None else round(float(scale) * math.log(20.0), 6),
        half_width_by_len=half,
    )


def series_frame(
    releases: Sequence[SeriesRelease],
) -> tuple[pd.DataFrame, tuple[ReleaseScope, ...]]:
    """The series table of ``releases`` (in series order) and each release's scope.

    Rows are sorted by length, combination (code-point order) and period (series order).
    """
    tables, scopes = [], []
    for r in releases:
        frame = _aggregates(r)
        scope = release_scope(r, frame)
        scopes.append(scope)
        record = {"length": 0, "combination": "", "count": scope.record_count}
        frame = pd.concat([pd.DataFrame([record]), frame], ignore_index=True)
        frame[HALF_WIDTH_COLUMN] = frame["length"].map(
            lambda k, s=scope: s.record_count_hw if k == 0 else s.half_width_by_len.get(int(k))
        )
        frame["period"] = r.period
        tables.append(frame)
    columns: list[str] = []
    for scope in scopes:
        columns += [c for c in scope.columns if c not in columns]
    published = pd.concat(tables, ignore_index=True)
    for c in columns:
        if c not in published.columns:
            published[c] = pd.NA
    combos = (
        published[["length", "combination", *columns]]
        .drop_duplicates("combination")
        .reset_index(drop=True)
    )
    rows = []
    for r, scope in zip(releases, scopes, strict=True):
        own = set(scope.columns)
        fits = combos["length"] <= scope.reporting_length
        for c in columns:
            if c not in own:
                fits &= combos[c].isna()
        rows.append(combos[fits].assign(period=r.period, release_id=r.release_id))
    grid = pd.concat(rows, ignore_index=True)
    counts = published[["period", "combination", "count", HALF_WIDTH_COLUMN]]
    out = grid.merge(counts, on=["period", "combination"], how="left", validate="one_to_one")
    out["suppressed"] = out["count"].isna()
    out["count"] = out["count"].astype("Int64")
    out[HALF_WIDTH_COLUMN] = out[HALF_WIDTH_COLUMN].astype("Float64")
    order = {r.period: i for i, r in enumerate(releases)}
    out["_p"] = out["period"].map(order)
    out["_c"] = out["combination"].map(lambda t: t.encode())
    out = out.sort_values(["length", "_c", "_p"], kind="stable").reset_index(drop=True)
    out["length"] = out["length"].astype("int64")
    for c in columns:
        out[c] = out[c].astype("string")
    return out[[*SERIES_COLUMNS, *columns]], tuple(scopes)


def changes(frame: pd.DataFrame, periods: Sequence[str]) -> pd.DataFrame:
    """Every change of a combination's count between two consecutive periods of the series
    where both report it, with the combined 95% noise half-width sqrt(h1² + h2²) of the two
    independent noises and whether the change exceeds it (False when a half-width is unknown).

    Rounding and the consistency post-processing are not in the half-widths, as on the release
    pages.
    """
    order = {p: i for i, p in enumerate(periods)}
    shown = frame.loc[
        ~frame["suppressed"], ["length", "combination", "period", "count", HALF_WIDTH_COLUMN]
    ].copy()
    shown["_p"] = shown["period"].map(order)
    nxt = shown.assign(_p=shown["_p"] - 1)
    pairs = shown.merge(nxt, on=["length", "combination", "_p"], suffixes=("_from", "_to"))
    combined = np.sqrt(
        pairs[f"{HALF_WIDTH_COLUMN}_from"].astype("float64") ** 2
        + pairs[f"{HALF_WIDTH_COLUMN}_to"].astype("float64") ** 2
    )
    change = pairs["count_to"].astype("int64") - pairs["count_from"].astype("int64")
    out = pd.DataFrame(
        {
            "length": pairs["length"].astype("int64"),
            "combination": pairs["combination"],
            "period_from": pairs["period_from"],
            "period_to": pairs["period_to"],
            "count_from": pairs["count_from"].astype("int64"),
            "count_to": pairs["count_to"].astype("int64"),
            "change": change,
            "noise_half_width_95_combined": combined.round(6),
            "exceeds_noise": (change.abs() > combined).fillna(False).astype(bool),
        }
    )
    return out.reset_index(drop=True)
