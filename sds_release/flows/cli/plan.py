"""``sds plan INPUT``: the preview of a release: its noise, thresholds and cost before anything is
spent, and what the SDS plan would choose for it.

Reads the input's header (or the config's schema) and the ledger, never a data row, and charges
nothing (the preview is made by :mod:`sds_release.store.inputs.preview`; this prints it).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sds_release.flows.cli.common import (
    HomeOpt,
    JsonOpt,
    LedgerOpt,
    echo_json,
    home_dir,
    print_table,
    stdout_console,
)

if TYPE_CHECKING:
    from sds_release.store.inputs.preview import ReleasePreview

__all__ = ["plan"]


def plan(
    input: Annotated[
        str,
        typer.Argument(
            metavar="INPUT",
            help="The sensitive table (only its header is read) or any path "
            "when the config declares a schema.",
        ),
    ],
    config: Annotated[Path | None, typer.Option(help="TOML release config.")] = None,
    dataset: Annotated[str | None, typer.Option(help="Dataset id (its budget and runway).")] = None,
    epsilon: Annotated[float | None, typer.Option(help="ε of the previewed release.")] = None,
    delta: Annotated[float | None, typer.Option(help="δ (default: from the schema).")] = None,
    reporting_length: Annotated[
        int | None, typer.Option(help="R: the longest combination.")
    ] = None,
    records: Annotated[
        int | None,
        typer.Option(
            help="The record count N to assume (default: the dataset's last DP record count "
            "in this home, else the schema's max_rows)."
        ),
    ] = None,
    target_ci: Annotated[
        float | None,
        typer.Option(
            help="Solve the smallest ε whose length-1 95% interval half-width is at most this."
        ),
    ] = None,
    period: Annotated[
        str | None,
        typer.Option(
            help="A periodic dataset (config period_column): the period to preview (its budget "
            "and runway)."
        ),
    ] = None,
    as_json: JsonOpt = False,
    home: HomeOpt = None,
    ledger: LedgerOpt = None,
) -> None:
    """Preview a release: per length, the noise, interval and threshold it would have; its cost
    and how many such releases the budget still pays for. Charges nothing."""
    from sds_release.store.config import build_params, load_config
    from sds_release.store.config.periods import resolve_period
    from sds_release.store.inputs.preview import make_preview

    cfg = load_config(config) if config is not None else {}
    if "dataset" not in cfg and dataset is None:
        dataset = Path(input).stem or "dataset"  # only names the budget the preview reads
    root = home_dir(home)
    params = build_params(
        cfg,
        {
            "input": str(Path(input).expanduser().absolute()),
            "dataset": dataset,
            "epsilon": epsilon,
            "delta": delta,
            "reporting_length": reporting_length,
            "period": period,
            "home": str(root),
            "ledger": ledger,
        },
    )
    found = make_preview(resolve_period(params), records=records, target_ci=target_ci)
    if as_json:
        echo_json(found.to_dict())
        return
    _print(found)


def _print(p: ReleasePreview) -> None:
    from rich.table import Table

    from sds_core.marginals.forecast import EXAMPLE_COUNTS

    out = stdout_console()
    out.print(
        f"preview of a release of dataset {p.dataset} "
        "(nothing read but the header, nothing charged)"
    )
    out.print(f"columns: {len(p.columns)} from {p.columns_from}")
    n = p.records
    out.print(f"records N: {n if n is not None else '?'} ({p.records_from})")
    if p.sds_plan is not None:  # what the release would choose from its DP count near N
        out.print(f"SDS plan for N: {p.sds_plan.reason}")
    if p.target_ci is not None:
        out.print(
            f"--target-ci {p.target_ci:g}: the smallest ε with a length-1 95% half-width of at "
            f"most {p.target_ci:g} is ε = {p.epsilon:.3g}"
        )
    f = p.forecast
    out.print(
        f"ε = {p.epsilon:.6g}, δ = {p.delta:.3g}; the record count has noise sd "
        f"{f.record_count_noise_sd:.3g}"
    )
    noise = Table("k", "σ_k", "Δ_k range", "Δ_k likely", "noise sd", "±95%", "threshold")
    counts = Table("k", *(f"a true count of {c}" for c in EXAMPLE_COUNTS))
    for x in f.lengths:
        noise.add_row(
            str(x.length),
            f"{x.sigma:.3g}",
            f"{x.allowed_range[0]}–{x.allowed_range[1]}",
            str(x.allowed),
            f"{x.noise_sd:.3g}",
            f"±{x.half_width_95:.3g}",
            "—" if x.threshold is None else f"{x.threshold:.3g}",
        )
        counts.add_row(
            str(x.length),
            *(
                "not released"
                if x.threshold is None
                else f"{max(e['low'], 0):.0f}–{e['high']:.0f}, "
                f"{100 * e['p_suppressed']:.0f}% suppressed"
                for e in x.examples
            ),
        )
    print_table(out, noise)
    print_table(out, counts)
    out.print(
        "Δ_k likely: C(columns, k), what the DP percentile picks when records fill every "
        "column; a smaller Δ_k (emptier records) means less noise. The release's manifest "
        "gives the Δ_k it chose and the same figures for it."
    )
    if p.too_small:
        first = f.lengths[0]
        out.print(
            f"too small: the length-1 threshold ({first.threshold:,.0f}) is at least N = {n}, so "
            "even a value every record holds would more likely than not be suppressed: a release "
            "would most likely be charged and end with no count to publish. Raise ε or release "
            "more rows."
        )
    b = p.budget
    if b is None:
        out.print(f"budget: dataset {p.dataset} has none in this home's ledger yet")
    else:
        policy = "" if b.policy is None else f"; policy {b.policy.describe()}"
        out.print(
            f"budget: ε {b.epsilon_remaining:.6g} left of {b.epsilon_lifetime:.6g}{policy}; "
            f"it pays for {p.releases_left} more release(s) of ε = {p.epsilon:.6g}"
        )
