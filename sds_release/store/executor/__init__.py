"""The executor: where a release's data work runs, chosen once per release.

- ``base``: the :class:`~sds_release.store.executor.base.Executor` interface every executor
  implements (read and gate the input, the record limit, DP bins' numbers, prepare, the
  counting backend, synthesize and checkpoint, the output gate, the records' chunks);
- ``local``: :class:`~sds_release.store.executor.local.LocalExecutor`, everything in this process.

The Dask executor is its own package (:mod:`sds_release.store.cluster`); the flow picks one by the
``executor`` parameter (``sds_release/flows/release.py``). Public names are exported here, lazily.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "Executor": "sds_release.store.executor.base",
    "InputTable": "sds_release.store.executor.base",
    "LocalExecutor": "sds_release.store.executor.local",
    "Records": "sds_release.store.executor.base",
}

__all__ = ["Executor", "InputTable", "LocalExecutor", "Records"]


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


if TYPE_CHECKING:
    from sds_release.store.executor.base import Executor, InputTable, Records
    from sds_release.store.executor.local import LocalExecutor
