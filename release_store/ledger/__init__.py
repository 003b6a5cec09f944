"""The privacy-budget ledger: budgets, reservations, charges, hash chain, backends, dashboard.

- ``book``: the :class:`Ledger`, the one way in: each call one transaction of its backend;
- ``budgets``: a dataset's budget: setting it, what is left, whether a release fits in it;
- ``reservations``: a release's reservation: reserve, plan revision, stage charges, close;
- ``queries``: the reads: a release's reservation and spend, a dataset's terms and use;
- ``values``: value types: planned charges, rows, statuses, errors and the spend rule;
- ``chain``: the hash chain: appending, copying verbatim and verifying;
- ``backends``: ledger URLs and the SQLite/PostgreSQL backends;
- ``schema``: the table layout (SQL of each backend) and its version;
- ``periods``: the period formats of a per-period budget and one spelling per period;
- ``anchor``: the ledger head a complete release anchors (private) and the manifest's
  commitment to it, and their check;
- ``replay``: one release's recorded charges, as a replay reads them;
- ``migration``: ``sds ledger migrate``: a verified copy to another URL;
- ``budget_view``: the budget dashboard of one dataset (rows of its Prefect artifact).

Public names are exported here, lazily (importing the package loads none of its modules).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "ALERT_SHARE_DEFAULT": "release_store.ledger.budget_view",
    "ALERT_SHARE_VARIABLE": "release_store.ledger.budget_view",
    "BudgetExceededError": "release_store.ledger.values",
    "BudgetStatus": "release_store.ledger.values",
    "BudgetView": "release_store.ledger.budget_view",
    "CancelResult": "release_store.ledger.values",
    "ChargeRow": "release_store.ledger.values",
    "FIELDS": "release_store.ledger.chain",
    "GENESIS_HASH": "release_store.ledger.chain",
    "LEDGER_FILE": "release_store.ledger.backends",
    "LEDGER_URL_ENV": "release_store.ledger.backends",
    "Ledger": "release_store.ledger.book",
    "LedgerConflictError": "release_store.ledger.values",
    "LedgerCorruptError": "release_store.ledger.backends",
    "LedgerUnavailableError": "release_store.ledger.backends",
    "LedgerMovedError": "release_store.ledger.book",
    "LedgerStore": "release_store.ledger.backends",
    "MigrationReport": "release_store.ledger.migration",
    "PeriodMismatchError": "release_store.ledger.values",
    "PlannedCharge": "release_store.ledger.values",
    "PostgresStore": "release_store.ledger.backends",
    "ReplayLedger": "release_store.ledger.replay",
    "Reservation": "release_store.ledger.values",
    "SqliteStore": "release_store.ledger.backends",
    "VerifyReport": "release_store.ledger.chain",
    "ANCHOR_FILE": "release_store.ledger.anchor",
    "anchor_commitment": "release_store.ledger.anchor",
    "anchor_key": "release_store.ledger.anchor",
    "anchor_problems": "release_store.ledger.anchor",
    "append_row": "release_store.ledger.chain",
    "artifact_key": "release_store.ledger.budget_view",
    "check_name": "release_store.ledger.values",
    "check_share": "release_store.ledger.budget_view",
    "dec": "release_store.ledger.values",
    "default_ledger_url": "release_store.ledger.backends",
    "ledger_anchor": "release_store.ledger.anchor",
    "migrate_ledger": "release_store.ledger.migration",
    "open_store": "release_store.ledger.backends",
    "partial_spend": "release_store.ledger.values",
    "period_refusal": "release_store.ledger.values",
    "redact_url": "release_store.ledger.backends",
    "resolve_ledger_url": "release_store.ledger.backends",
    "row_hash": "release_store.ledger.chain",
    "split_password": "release_store.ledger.backends",
    "sqlite_path": "release_store.ledger.backends",
    "validate_plan": "release_store.ledger.values",
    "verify_chain": "release_store.ledger.chain",
}

__all__ = [
    "ALERT_SHARE_DEFAULT",
    "ALERT_SHARE_VARIABLE",
    "ANCHOR_FILE",
    "FIELDS",
    "GENESIS_HASH",
    "LEDGER_FILE",
    "LEDGER_URL_ENV",
    "BudgetExceededError",
    "BudgetStatus",
    "BudgetView",
    "CancelResult",
    "ChargeRow",
    "Ledger",
    "LedgerConflictError",
    "LedgerCorruptError",
    "LedgerMovedError",
    "LedgerStore",
    "LedgerUnavailableError",
    "MigrationReport",
    "PeriodMismatchError",
    "PlannedCharge",
    "PostgresStore",
    "ReplayLedger",
    "Reservation",
    "SqliteStore",
    "VerifyReport",
    "anchor_commitment",
    "anchor_key",
    "anchor_problems",
    "append_row",
    "artifact_key",
    "check_name",
    "check_share",
    "dec",
    "default_ledger_url",
    "ledger_anchor",
    "migrate_ledger",
    "open_store",
    "partial_spend",
    "period_refusal",
    "redact_url",
    "resolve_ledger_url",
    "row_hash",
    "split_password",
    "sqlite_path",
    "validate_plan",
    "verify_chain",
]


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


if TYPE_CHECKING:
    from release_store.ledger.anchor import (
        ANCHOR_FILE,
        anchor_commitment,
        anchor_key,
        anchor_problems,
        ledger_anchor,
    )
    from release_store.ledger.backends import (
        LEDGER_FILE,
        LEDGER_URL_ENV,
        LedgerCorruptError,
        LedgerStore,
        LedgerUnavailableError,
        PostgresStore,
        SqliteStore,
        default_ledger_url,
        open_store,
        redact_url,
        resolve_ledger_url,
        split_password,
        sqlite_path,
    )
    from release_store.ledger.book import Ledger, LedgerMovedError
    from release_store.ledger.budget_view import (
        ALERT_SHARE_DEFAULT,
        ALERT_SHARE_VARIABLE,
        BudgetView,
        artifact_key,
        check_share,
    )
    from release_store.ledger.chain import (
        FIELDS,
        GENESIS_HASH,
        VerifyReport,
        append_row,
        row_hash,
        verify_chain,
    )
    from release_store.ledger.migration import MigrationReport, migrate_ledger
    from release_store.ledger.replay import ReplayLedger
    from release_store.ledger.values import (
        BudgetExceededError,
        BudgetStatus,
        CancelResult,
        ChargeRow,
        LedgerConflictError,
        PeriodMismatchError,
        PlannedCharge,
        Reservation,
        check_name,
        dec,
        partial_spend,
        period_refusal,
        validate_plan,
    )
