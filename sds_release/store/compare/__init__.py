"""`sds evaluate` and `sds split`: the data owner's evaluation outside a release (NOT DP).

- ``tables``: the utility of a synthetic table against the original (SDS aggregate metrics,
  marginal fidelity), both prepared as the release prepared its input;
- ``split``: ``sds split``, the control rows held back before a release (private files);
- ``risk``: ``sds evaluate --privacy-risk``, anonymeter's singling-out, linkability and
  inference risks of the synthetic records against the control rows, run in anonymeter's own
  environment (also a ``privacy_risk`` release's evaluate stage: ``release_risks``);
- ``anonymeter_job``: the script run in that environment (imports nothing of the project).

Public names are exported here, lazily (importing the package loads none of its modules).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "MIN_SIDE_ROWS": "sds_release.store.compare.split",
    "PreparedReading": "sds_release.store.compare.tables",
    "RiskParams": "sds_release.store.compare.risk",
    "SplitFiles": "sds_release.store.compare.split",
    "anonymeter_python": "sds_release.store.compare.risk",
    "compare_tables": "sds_release.store.compare.tables",
    "privacy_risk": "sds_release.store.compare.risk",
    "release_risks": "sds_release.store.compare.risk",
    "table_risks": "sds_release.store.compare.risk",
    "risk_summary_lines": "sds_release.store.compare.risk",
    "split_input": "sds_release.store.compare.split",
    "summary_lines": "sds_release.store.compare.tables",
}

__all__ = [
    "MIN_SIDE_ROWS",
    "PreparedReading",
    "RiskParams",
    "SplitFiles",
    "anonymeter_python",
    "compare_tables",
    "privacy_risk",
    "release_risks",
    "risk_summary_lines",
    "split_input",
    "summary_lines",
    "table_risks",
]


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


if TYPE_CHECKING:
    from sds_release.store.compare.risk import (
        RiskParams,
        anonymeter_python,
        privacy_risk,
        release_risks,
        risk_summary_lines,
        table_risks,
    )
    from sds_release.store.compare.split import MIN_SIDE_ROWS, SplitFiles, split_input
    from sds_release.store.compare.tables import PreparedReading, compare_tables, summary_lines
