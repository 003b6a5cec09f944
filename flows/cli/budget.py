"""``sds budget set`` and ``sds budget show``: the lifetime privacy budget of each dataset."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated

import typer

from flows.cli.common import HomeOpt, JsonOpt, LedgerOpt, SdsTyper, echo_json, fail, home_dir

__all__ = ["budget_app"]

budget_app = SdsTyper(help="Lifetime privacy budgets per dataset.")


@budget_app.command("set")
def budget_set(
    dataset: str,
    epsilon: Annotated[float, typer.Option(help="Lifetime ε.")],
    delta: Annotated[float, typer.Option(help="Lifetime δ.")] = 1e-5,
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
    home: HomeOpt = None,
    ledger: LedgerOpt = None,
) -> None:
    """Set a dataset's lifetime (ε, δ) budget and, optionally, its per-release policy."""
    from release_store.ledger.book import Ledger
    from release_store.workspace.home import validate_id

    root = home_dir(home)
    validate_id(dataset, "dataset id")
    st = Ledger.open(root, ledger).set_budget(
        dataset,
        epsilon=epsilon,
        delta=delta,
        max_epsilon_per_release=max_epsilon_per_release,
        max_delta_per_release=max_delta_per_release,
        clear_policy=clear_policy,
    )
    typer.echo(
        f"{dataset}: lifetime ε={st.epsilon_lifetime:.6g} δ={st.delta_lifetime:.3g}, "
        f"remaining ε={st.epsilon_remaining:.6g} δ={st.delta_remaining:.3g}"
    )
    if st.policy is not None:
        typer.echo(f"{dataset}: policy {st.policy.describe()} (set by {st.policy.set_by})")
    if os.environ.get("PREFECT_API_URL"):  # a real server: refresh its budget dashboard
        _budget_to_prefect(root, dataset, ledger)


def _budget_to_prefect(root: Path, dataset: str, ledger: str | None = None) -> None:
    """The dataset's budget table artifact and events on the Prefect server (``budget set``)."""
    from flows.local.launch import prefect_environment
    from release_store.ledger.budget_view import artifact_key

    prefect_environment(root)
    try:
        from prefect.events.worker import EventsWorker

        from tasks.artifacts import show_budget

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
    from rich.console import Console
    from rich.table import Table

    from release_store.ledger.book import Ledger

    book = Ledger.open(home_dir(home), ledger)
    rows = [book.budget(dataset)] if dataset else book.datasets()
    rows = [r for r in rows if r is not None]
    if dataset and not rows:
        raise fail(
            f"dataset {dataset!r} has no budget; set one with `sds budget set {dataset} "
            "--epsilon E`",
            1,
        )
    if as_json:
        echo_json([r.to_dict() for r in rows])
        return
    table = Table(
        "dataset", "ε lifetime", "ε spent", "ε reserved", "ε left", "δ left", "per-release policy"
    )
    for r in rows:
        table.add_row(
            r.dataset,
            f"{r.epsilon_lifetime:.6g}",
            f"{r.epsilon_spent:.6g}",
            f"{r.epsilon_reserved:.6g}",
            f"{r.epsilon_remaining:.6g}",
            f"{r.delta_remaining:.3g}",
            "none" if r.policy is None else f"{r.policy.describe()} ({r.policy.set_by})",
        )
    Console().print(table)
