"""deployments/automations.py (a script run without the package's imports) names the Prefect
variable of the budget alert's share as the ledger does."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from sds_release.store.ledger.budget_view import ALERT_SHARE_VARIABLE

SCRIPT = Path(__file__).resolve().parents[3] / "deployments" / "automations.py"


def test_the_script_and_the_ledger_name_one_variable() -> None:
    """The script's SHARE_VARIABLE is the ledger's ALERT_SHARE_VARIABLE."""
    spec = importlib.util.spec_from_file_location("sds_automations", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.SHARE_VARIABLE == ALERT_SHARE_VARIABLE
