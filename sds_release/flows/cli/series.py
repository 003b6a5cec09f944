"""``sds series DATASET [--out DIR] [--until PERIOD]``: a dataset's DP counts across its periods
(``series.parquet``, ``series.html``, signed), from its complete, verified releases."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sds_release.flows.cli.common import HomeOpt, home_dir, warn

__all__ = ["series_command"]


def series_command(
    dataset: Annotated[str, typer.Argument(help="The dataset id (see `sds audit`).")],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Folder to write (default HOME/series/DATASET/<last period>); an existing one "
            "must hold an earlier series, which is replaced.",
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option("--until", help="The last period to include (default: every period)."),
    ] = None,
    home: HomeOpt = None,
) -> None:
    """Write the series of DATASET: every published combination's DP count in each period,
    with its 95% noise interval (suppressed where a period's release did not report it), as
    series.parquet and series.html, signed like a release (`sds verify DIR` checks it).

    Reads only published files: the sensitive data and the ledger are not read, nothing is
    charged. The last line printed is the series' folder.
    """
    from sds_release.store.series.files import write_series

    written = write_series(home_dir(home), dataset, out=out, until=until)
    for s in written.sources.skipped:
        warn(f"release {s.release_id} left out of the series: {s.reason}")
    periods = [r.period for r in written.sources.releases]
    what = "period(s)" if written.sources.by_period else "release(s)"
    typer.echo(
        f"series of {dataset}: {len(periods)} {what} ({periods[0]} to {periods[-1]}), "
        f"{written.rows} rows, {written.changes_beyond_noise} change(s) beyond the noise; "
        f"signed with key {written.key_id}"
    )
    typer.echo(written.path)
