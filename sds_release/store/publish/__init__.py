"""Publishing a release: the DP artifacts, the report and the manifest, written to disk.

- ``artifacts``: the publish stage's files, the private custodian report, and the manifest
  turning complete;
- ``synthetic``: the synthetic records' files, streamed from their chunks (any executor's).

Public names are exported here, lazily (importing the package loads none of its modules).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "ARTIFACTS": "sds_release.store.publish.artifacts",
    "public_evaluation": "sds_release.store.publish.artifacts",
    "synthetic_layout": "sds_release.store.publish.artifacts",
    "write_artifacts": "sds_release.store.publish.artifacts",
    "write_custodian_report": "sds_release.store.publish.artifacts",
    "write_release": "sds_release.store.publish.artifacts",
    "write_report_and_explorer": "sds_release.store.publish.artifacts",
    "write_synthetic": "sds_release.store.publish.synthetic",
}

__all__ = [
    "ARTIFACTS",
    "public_evaluation",
    "synthetic_layout",
    "write_artifacts",
    "write_custodian_report",
    "write_release",
    "write_report_and_explorer",
    "write_synthetic",
]


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


if TYPE_CHECKING:
    from sds_release.store.publish.artifacts import (
        ARTIFACTS,
        public_evaluation,
        synthetic_layout,
        write_artifacts,
        write_custodian_report,
        write_release,
        write_report_and_explorer,
    )
    from sds_release.store.publish.synthetic import write_synthetic
