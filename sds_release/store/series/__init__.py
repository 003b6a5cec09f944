"""A dataset's releases seen over time: its DP counts as series across periods.

- ``sources``: which releases a series is made of (complete, verified, one per period, in order);
- ``table``: the series table (one row per combination and period) and the changes between
  consecutive periods measured against their noise;
- ``page``: ``series.html`` (self-contained, offline) and its data;
- ``files``: the signed series folder (``series.parquet``, ``series.html``, ``series.json``,
  ``series.sig``) and its check (``sds verify``).

Post-processing of published files only: nothing here reads the ledger or the sensitive data.
Public names are exported here, lazily (importing the package loads none of its modules).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "CHANGE_COLUMNS": "sds_release.store.series.table",
    "NOT_RELEASED": "sds_release.store.series.page",
    "SERIES_COLUMNS": "sds_release.store.series.table",
    "SERIES_FILES": "sds_release.store.series.files",
    "SERIES_MANIFEST": "sds_release.store.series.files",
    "SERIES_SIGNATURE": "sds_release.store.series.files",
    "SUPPRESSED": "sds_release.store.series.page",
    "TOP_CHANGES": "sds_release.store.series.page",
    "ReleaseScope": "sds_release.store.series.table",
    "SeriesRelease": "sds_release.store.series.sources",
    "SeriesSources": "sds_release.store.series.sources",
    "Skipped": "sds_release.store.series.sources",
    "WrittenSeries": "sds_release.store.series.files",
    "changes": "sds_release.store.series.table",
    "is_series_dir": "sds_release.store.series.files",
    "release_scope": "sds_release.store.series.table",
    "series_dir": "sds_release.store.series.files",
    "series_frame": "sds_release.store.series.table",
    "series_html": "sds_release.store.series.page",
    "series_payload": "sds_release.store.series.page",
    "series_sources": "sds_release.store.series.sources",
    "verify_series": "sds_release.store.series.files",
    "write_series": "sds_release.store.series.files",
}

__all__ = [
    "CHANGE_COLUMNS",
    "NOT_RELEASED",
    "SERIES_COLUMNS",
    "SERIES_FILES",
    "SERIES_MANIFEST",
    "SERIES_SIGNATURE",
    "SUPPRESSED",
    "TOP_CHANGES",
    "ReleaseScope",
    "SeriesRelease",
    "SeriesSources",
    "Skipped",
    "WrittenSeries",
    "changes",
    "is_series_dir",
    "release_scope",
    "series_dir",
    "series_frame",
    "series_html",
    "series_payload",
    "series_sources",
    "verify_series",
    "write_series",
]


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


if TYPE_CHECKING:
    from sds_release.store.series.files import (
        SERIES_FILES,
        SERIES_MANIFEST,
        SERIES_SIGNATURE,
        WrittenSeries,
        is_series_dir,
        series_dir,
        verify_series,
        write_series,
    )
    from sds_release.store.series.page import (
        NOT_RELEASED,
        SUPPRESSED,
        TOP_CHANGES,
        series_html,
        series_payload,
    )
    from sds_release.store.series.sources import (
        SeriesRelease,
        SeriesSources,
        Skipped,
        series_sources,
    )
    from sds_release.store.series.table import (
        CHANGE_COLUMNS,
        SERIES_COLUMNS,
        ReleaseScope,
        changes,
        release_scope,
        series_frame,
    )
