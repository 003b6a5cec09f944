"""``sds budget set`` and ``sds budget show``: the privacy budget of each dataset (lifetime, or
per period with an optional lifetime cap across periods)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated

import typer

from sds_release.flows.cli.common import (
    HomeOpt,
    JsonOpt,
    LedgerOpt,
    SdsTyper,
    echo_json,
    fail,
    home_dir,
    print_table,
    stdout_console,
)

__all__ = ["budget_app"]

budget_app = SdsTyper(help="Privacy budgets per dataset (lifetime, or per period).")


@budget_app.command("set")
def budget_set(
    dataset: str,
    epsilon: Annotated[
        float, typer.Option(help="Lifetime ε (with --per-period: each period's ε).")
    ],
    delta: Annotated[
        float, typer.Option(help="Lifetime δ (with --per-period: each period's δ).")
    ] = 1e-5,
    max_epsilon_per_release: Annotated[
        float | None,
        typer.Option(
            help="Policy: no release of the dataset may spend more ε than this, whatever is "
            "left (CLI, deployments and library alike). Kept when not given."
        ),
    ] = None,
    max_delta_per_release: Annotated[
        float | None,
        typer.Option(help="Policy: no release of the dataset may spend more δ than this."),
    ] = None,
    clear_policy: Annotated[
        bool, typer.Option("--clear-policy", help="Remove the per-release policy.")
    ] = False,
    per_period: Annotated[
        bool,
        typer.Option(
            "--per-period",
            help="--epsilon/--delta are the budget of each period (config period_column; "
            "sds release --period V): the periods' rows are disjoint, so their releases "
            "compose in parallel (docs/privacy.md). Refused once the dataset spent from a "
            "lifetime budget.",
        ),
    ] = False,
    lifetime_epsilon: Annotated[
        float | None,
        typer.Option(
            help="With --per-period: a cap on the ε all periods spend together (their sum), "
            "whatever each period has left. Kept when not given.",
        ),
    ] = None,
    period_format: Annotated[
        str | None,
        typer.Option(
            help="With --per-period: how the dataset's periods are written, one of YYYY-MM "
            "(the default), YYYY-Qn, YYYY, YYYY-MM-DD; every release's --period and "
            "period_format must be written so (one spelling, one budget per period). Kept when "
            "not given.",
        ),
    ] = None,
    home: HomeOpt = None,
    ledger: LedgerOpt = None,
) -> None:
    """Set a dataset's lifetime (ε, δ) budget, or its budget per period, and optionally its
    per-release policy."""
    from sds_release.store.ledger.book import Ledger
    from sds_release.store.workspace.home import validate_id

    root = home_dir(home)
    validate_id(dataset, "dataset id")
    book = Ledger.open(root, ledger)
    st = book.set_budget(
        dataset,
        epsilon=epsilon,
        delta=delta,
        max_epsilon_per_release=max_epsilon_per_release,
        max_delta_per_release=max_delta_per_release,
        clear_policy=clear_policy,
        per_period=per_period,
        lifetime_epsilon=lifetime_epsilon,
        period_format=period_format,
    )
    if st.per_period:
        cap = (
            ""
            if st.lifetime_epsilon is None
            else f"; lifetime cap ε={st.lifetime_epsilon:.6g} across periods, "
            f"ε={st.epsilon_cap_remaining:.6g} left"
        )
        typer.echo(
            f"{dataset}: per period ε={st.epsilon_lifetime:.6g} δ={st.delta_lifetime:.3g} "
            f"({len(st.periods)} period(s) released so far){cap}; periods written "
            f"{book.period_format(dataset)}"
        )
        typer.echo(_CAP_NOTE)
    else:
        typer.echo(
            f"{dataset}: lifetime ε={st.epsilon_lifetime:.6g} δ={st.delta_lifetime:.3g}, "
            f"remaining ε={st.epsilon_remaining:.6g} δ={st.delta_remaining:.3g}"
        )
    if st.policy is not None:
        typer.echo(f"{dataset}: policy {st.policy.describe()} (set by {st.policy.set_by})")
    if os.environ.get("PREFECT_API_URL"):  # a real server: refresh its budget dashboard
        _budget_to_prefect(root, dataset, ledger)


_CAP_NOTE = (
    "note: each period's ε protects each row of that period, as long as a row's period never "
    "changes between releases. Someone with rows in several periods (no subject_id) is "
    "exposed at the sum of those periods' ε; --lifetime-epsilon caps that sum across all "
    "periods (without it, nothing bounds how many periods are released)."
)


def _budget_to_prefect(root: Path, dataset: str, ledger: str | None = None) -> None:
    """The dataset's budget table artifact and events on the Prefect server (``budget set``)."""
    from sds_release.flows.local.launch import prefect_environment
    from sds_release.store.ledger.budget_view import artifact_key

    prefect_environment(root)
    try:
        from prefect.events.worker import EventsWorker

        from sds_release.tasks.artifacts import show_budget

        show_budget(root, dataset, ledger_url=ledger)
        quiet = logging.getLogger("EventsWorker")  # its "still processing" note while draining
        quiet.setLevel(logging.ERROR)
        EventsWorker.drain_all(timeout=30)
    except Exception as e:  # the budget is set; only the dashboard is behind
        key = artifact_key("budget", dataset)
        typer.echo(
            f"sds: warning: budget set, but the Prefect artifact {key} was not "
            f"updated ({type(e).__name__}: {e}); check PREFECT_API_URL",
            err=True,
        )
        return
    typer.echo(f"budget table artifact updated on {os.environ['PREFECT_API_URL']}")


@budget_app.command("show")
def budget_show(
    dataset: Annotated[str | None, typer.Argument()] = None,
    home: HomeOpt = None,
    ledger: LedgerOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show lifetime, spent, reserved and remaining budget per dataset."""
    from rich.table import Table

    from sds_release.store.ledger.book import Ledger
    from sds_release.store.ledger.budget_view import BudgetView

    book = Ledger.open(home_dir(home), ledger)
    names = [dataset] if dataset else [r.dataset for r in book.datasets()]
    views = [v for v in (BudgetView.load(book, n) for n in names) if v is not None]
    if dataset and not views:
        raise fail(
            f"dataset {dataset!r} has no budget; set one with `sds budget set {dataset} "
            "--epsilon E`",
            1,
        )
    if as_json:
        echo_json([v.payload() for v in views])
        return
    table = Table(
        "dataset", "period", "budget", "ε spent", "ε reserved", "ε left", "δ left", "runway",
        "per-release policy",
    )  # fmt: skip
    for view in views:
        for row in view.period_rows():
            table.add_row(*row)
    if any(v.status.per_period for v in views):
        table.caption = (
            "A per-period dataset: its first row (period *) adds up the spend of every period; "
            "its ε/δ left and runway are those of a period not released yet. Then one row per "
            "released period, with its runway of that period's last release size."
        )
    print_table(stdout_console(), table)
