"""``sds evaluate ORIGINAL SYNTHETIC``: compare a synthetic table with the original, outside a
release (NOT differentially private: it reads the sensitive table)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flows.cli.common import JsonOpt, echo_json

__all__ = ["evaluate"]


def evaluate(
    original: Annotated[str, typer.Argument(help="The sensitive table (CSV or Parquet).")],
    synthetic: Annotated[str, typer.Argument(help="The synthetic table, e.g. synthetic.csv.")],
    reporting_length: Annotated[int, typer.Option(min=1, help="Longest combination.")] = 3,
    config: Annotated[
        Path | None,
        typer.Option(
            help="Release config: preprocess ORIGINAL as the release did (columns, zeros, bins)."
        ),
    ] = None,
    resolution: Annotated[int, typer.Option(min=1, help="k of the preservation metrics.")] = 10,
    as_json: JsonOpt = False,
    delimiter: Annotated[str | None, typer.Option(help="CSV delimiter (default ',').")] = None,
) -> None:
    """Compare SYNTHETIC with ORIGINAL: SDS aggregate metrics and marginal TVD (NOT DP)."""
    from release_store.compare import compare_tables, summary_lines

    result = compare_tables(
        original,
        synthetic,
        reporting_length=reporting_length,
        resolution=resolution,
        config=config,
        delimiter=delimiter,
    )
    if as_json:
        echo_json(result)
        return
    for line in summary_lines(result):
        typer.echo(line)
