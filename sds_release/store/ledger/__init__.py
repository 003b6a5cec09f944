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
- ``units``: a dataset's privacy unit (rows, or subjects of one column), one per dataset;
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
    "ALERT_SHARE_DEFAULT": "sds_release.store.ledger.budget_view",
    "ALERT_SHARE_VARIABLE": "sds_release.store.ledger.budget_view",
    "BudgetExceededError": "sds_release.store.ledger.values",
    "BudgetStatus": "sds_release.store.ledger.values",
    "BudgetView": "sds_release.store.ledger.budget_view",
    "CancelResult": "sds_release.store.ledger.values",
    "ChargeRow": "sds_release.store.ledger.values",
    "FIELDS": "sds_release.store.ledger.chain",
    "GENESIS_HASH": "sds_release.store.ledger.chain",
    "LEDGER_FILE": "sds_release.store.ledger.backends",
    "LEDGER_URL_ENV": "sds_release.store.ledger.backends",
    "Ledger": "sds_release.store.ledger.book",
    "LedgerConflictError": "sds_release.store.ledger.values",
    "LedgerCorruptError": "sds_release.store.ledger.backends",
    "LedgerUnavailableError": "sds_release.store.ledger.backends",
    "LedgerMovedError": "sds_release.store.ledger.book",
    "LedgerStore": "sds_release.store.ledger.backends",
    "MigrationReport": "sds_release.store.ledger.migration",
    "PeriodMismatchError": "sds_release.store.ledger.values",
    "PlannedCharge": "sds_release.store.ledger.values",
    "UnitMismatchError": "sds_release.store.ledger.values",
    "PostgresStore": "sds_release.store.ledger.backends",
    "ReplayLedger": "sds_release.store.ledger.replay",
    "Reservation": "sds_release.store.ledger.values",
    "SqliteStore": "sds_release.store.ledger.backends",
    "VerifyReport": "sds_release.store.ledger.chain",
    "ANCHOR_FILE": "sds_release.store.ledger.anchor",
    "anchor_commitment": "sds_release.store.ledger.anchor",
    "anchor_key": "sds_release.store.ledger.anchor",
    "anchor_problems": "sds_release.store.ledger.anchor",
    "append_row": "sds_release.store.ledger.chain",
    "artifact_key": "sds_release.store.ledger.budget_view",
    "check_name": "sds_release.store.ledger.values",
    "check_share": "sds_release.store.ledger.budget_view",
    "dec": "sds_release.store.ledger.values",
    "default_ledger_url": "sds_release.store.ledger.backends",
    "ledger_anchor": "sds_release.store.ledger.anchor",
    "migrate_ledger": "sds_release.store.ledger.migration",
    "open_store": "sds_release.store.ledger.backends",
    "partial_spend": "sds_release.store.ledger.values",
    "period_refusal": "sds_release.store.ledger.values",
    "privacy_unit": "sds_release.store.ledger.units",
    "redact_url": "sds_release.store.ledger.backends",
    "resolve_ledger_url": "sds_release.store.ledger.backends",
    "row_hash": "sds_release.store.ledger.chain",
    "split_password": "sds_release.store.ledger.backends",
    "sqlite_path": "sds_release.store.ledger.backends",
    "validate_plan": "sds_release.store.ledger.values",
    "verify_chain": "sds_release.store.ledger.chain",
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
    "UnitMismatchError",
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
    "privacy_unit",
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
    from sds_release.store.ledger.anchor import (
        ANCHOR_FILE,
        anchor_commitment,
        anchor_key,
        anchor_problems,
        ledger_anchor,
    )
    from sds_release.store.ledger.backends import (
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
    from sds_release.store.ledger.book import Ledger, LedgerMovedError
    from sds_release.store.ledger.budget_view import (
        ALERT_SHARE_DEFAULT,
        ALERT_SHARE_VARIABLE,
        BudgetView,
        artifact_key,
        check_share,
    )
    from sds_release.store.ledger.chain import (
        FIELDS,
        GENESIS_HASH,
        VerifyReport,
        append_row,
        row_hash,
        verify_chain,
    )
    from sds_release.store.ledger.migration import MigrationReport, migrate_ledger
    from sds_release.store.ledger.replay import ReplayLedger
    from sds_release.store.ledger.units import privacy_unit
    from sds_release.store.ledger.values import (
        BudgetExceededError,
        BudgetStatus,
        CancelResult,
        ChargeRow,
        LedgerConflictError,
        PeriodMismatchError,
        PlannedCharge,
        Reservation,
        UnitMismatchError,
        check_name,
        dec,
        partial_spend,
        period_refusal,
        validate_plan,
    )
