"""The Dask executor: a release's data work on a ``distributed`` cluster.

- ``executor``: :class:`DaskExecutor` (the release's session: connect, close) and ``connect``;
- ``inputs``: the input read on the workers as Arrow parts (:class:`DaskInput`), the record
  limit, what DP binning and the zero-cell warning read of it;
- ``gate``: the schema gate on the input's parts and on the synthetic records' chunks;
- ``preparation``: the input prepared on the workers into a cluster table;
- ``table``: :class:`ClusterTable`, prepared records as partitions on the workers (sensitive or
  synthetic), ``map_reduce`` over them, :class:`Placement`;
- ``backend``: :class:`DaskBackend`, the DP engine's counting backend over a cluster table;
- ``reduction``: sums combined on the workers and gathered, :class:`DaskClusterError`;
- ``synthesis``: the synthetic records made on the workers, their checkpoint.

Public names are exported here, lazily (importing the package loads none of its modules).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "ADDRESS_ENV": "sds_release.store.cluster.executor",
    "CONNECT_TIMEOUT_S": "sds_release.store.cluster.executor",
    "CSV_BLOCKSIZE": "sds_release.store.cluster.inputs",
    "ClusterTable": "sds_release.store.cluster.table",
    "DaskBackend": "sds_release.store.cluster.backend",
    "DaskClusterError": "sds_release.store.cluster.reduction",
    "DaskExecutor": "sds_release.store.cluster.executor",
    "DaskInput": "sds_release.store.cluster.inputs",
    "GROUP_RECORDS": "sds_release.store.cluster.table",
    "LOOKUP_RECORDS": "sds_release.store.cluster.backend",
    "Placement": "sds_release.store.cluster.table",
    "StoredSynthetic": "sds_release.store.cluster.synthesis",
    "column_numbers": "sds_release.store.cluster.inputs",
    "connect": "sds_release.store.cluster.executor",
    "fingerprint_parts": "sds_release.store.cluster.preparation",
    "open_input": "sds_release.store.cluster.inputs",
    "prepare_parts": "sds_release.store.cluster.preparation",
    "sample_model_on_cluster": "sds_release.store.cluster.synthesis",
    "synthesize_on_cluster": "sds_release.store.cluster.synthesis",
    "synthesize_reconciled": "sds_release.store.cluster.synthesis",
    "validate_chunks": "sds_release.store.cluster.gate",
    "validate_parts": "sds_release.store.cluster.gate",
    "zero_counts_shares": "sds_release.store.cluster.inputs",
}

__all__ = [
    "ADDRESS_ENV",
    "CONNECT_TIMEOUT_S",
    "CSV_BLOCKSIZE",
    "GROUP_RECORDS",
    "LOOKUP_RECORDS",
    "ClusterTable",
    "DaskBackend",
    "DaskClusterError",
    "DaskExecutor",
    "DaskInput",
    "Placement",
    "StoredSynthetic",
    "column_numbers",
    "connect",
    "fingerprint_parts",
    "open_input",
    "prepare_parts",
    "sample_model_on_cluster",
    "synthesize_on_cluster",
    "synthesize_reconciled",
    "validate_chunks",
    "validate_parts",
    "zero_counts_shares",
]


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


if TYPE_CHECKING:
    from sds_release.store.cluster.backend import LOOKUP_RECORDS, DaskBackend
    from sds_release.store.cluster.executor import (
        ADDRESS_ENV,
        CONNECT_TIMEOUT_S,
        DaskExecutor,
        connect,
    )
    from sds_release.store.cluster.gate import validate_chunks, validate_parts
    from sds_release.store.cluster.inputs import (
        CSV_BLOCKSIZE,
        DaskInput,
        column_numbers,
        open_input,
        zero_counts_shares,
    )
    from sds_release.store.cluster.preparation import fingerprint_parts, prepare_parts
    from sds_release.store.cluster.reduction import DaskClusterError
    from sds_release.store.cluster.synthesis import (
        StoredSynthetic,
        sample_model_on_cluster,
        synthesize_on_cluster,
        synthesize_reconciled,
    )
    from sds_release.store.cluster.table import GROUP_RECORDS, ClusterTable, Placement
