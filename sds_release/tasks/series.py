"""The ``series`` task of a deployed release: the dataset's series rebuilt after the release.

Post-processing of published files (:func:`sds_release.store.series.files.write_series`): no ledger,
no sensitive data, nothing charged; its one log line names the folder and what it holds.
"""

from __future__ import annotations

from prefect import task

from sds_release.store.series.files import write_series
from sds_release.tasks.options import task_logger

__all__ = ["rebuild_series"]


@task(name="series", persist_result=False)
def rebuild_series(home: str, dataset: str, until: str | None) -> str:
    """Rebuild the series of ``dataset`` up to the period ``until`` (None: every release);
    returns its folder."""
    written = write_series(home, dataset, until=until)
    periods = [r.period for r in written.sources.releases]
    task_logger().info(
        "series of %s up to %s rebuilt: %d period(s), %d rows, %d change(s) beyond the noise, "
        "in %s",
        dataset,
        periods[-1],
        len(periods),
        written.rows,
        written.changes_beyond_noise,
        written.path,
    )
    for s in written.sources.skipped:
        task_logger().warning("release %s left out of the series: %s", s.release_id, s.reason)
    return str(written.path)
