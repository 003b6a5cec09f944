"""The Dask executor: counting backend, cluster session, input and records on the workers.

- ``backend``: ``DaskBackend``: the counting backend over partitions on the workers;
- ``session``: the release's cluster session: the client it connects, the counting backend it
  serves the stages, the ``Placement`` cache its backends share;
- ``inputs``: the input read, validated and prepared on the workers;
- ``synthesis``: the synthetic records on the workers: synthesis, checkpoint, gate, publish.

Public names are exported here, lazily (importing the package loads none of its modules).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "ADDRESS_ENV": "release_store.cluster.session",
    "CHUNK_ROWS": "release_store.cluster.synthesis",
    "CONNECT_TIMEOUT_S": "release_store.cluster.session",
    "CSV_BLOCKSIZE": "release_store.cluster.inputs",
    "DaskBackend": "release_store.cluster.backend",
    "DaskClusterError": "release_store.cluster.backend",
    "DaskInput": "release_store.cluster.inputs",
    "GROUP_RECORDS": "release_store.cluster.backend",
    "LOOKUP_RECORDS": "release_store.cluster.backend",
    "Placement": "release_store.cluster.backend",
    "ROWS_PER_PARTITION": "release_store.cluster.session",
    "ROW_GROUP": "release_store.cluster.synthesis",
    "StoredSynthetic": "release_store.cluster.synthesis",
    "chunk_bounds": "release_store.cluster.synthesis",
    "chunks": "release_store.cluster.synthesis",
    "cluster_session": "release_store.cluster.session",
    "column_numbers": "release_store.cluster.inputs",
    "connect": "release_store.cluster.session",
    "counting_backend": "release_store.cluster.session",
    "fingerprint_parts": "release_store.cluster.inputs",
    "open_input": "release_store.cluster.inputs",
    "output_columns": "release_store.cluster.synthesis",
    "prepare_parts": "release_store.cluster.inputs",
    "sample_model_on_cluster": "release_store.cluster.synthesis",
    "session_backend": "release_store.cluster.session",
    "session_client": "release_store.cluster.session",
    "synthesize_on_cluster": "release_store.cluster.synthesis",
    "synthesize_reconciled": "release_store.cluster.synthesis",
    "validate_chunks": "release_store.cluster.synthesis",
    "validate_parts": "release_store.cluster.inputs",
    "whole_table": "release_store.cluster.inputs",
    "write_synthetic": "release_store.cluster.synthesis",
    "zero_counts_shares": "release_store.cluster.inputs",
}

__all__ = [
    "ADDRESS_ENV",
    "CHUNK_ROWS",
    "CONNECT_TIMEOUT_S",
    "CSV_BLOCKSIZE",
    "GROUP_RECORDS",
    "LOOKUP_RECORDS",
    "ROWS_PER_PARTITION",
    "ROW_GROUP",
    "DaskBackend",
    "DaskClusterError",
    "DaskInput",
    "Placement",
    "StoredSynthetic",
    "chunk_bounds",
    "chunks",
    "cluster_session",
    "column_numbers",
    "connect",
    "counting_backend",
    "fingerprint_parts",
    "open_input",
    "output_columns",
    "prepare_parts",
    "sample_model_on_cluster",
    "session_backend",
    "session_client",
    "synthesize_on_cluster",
    "synthesize_reconciled",
    "validate_chunks",
    "validate_parts",
    "whole_table",
    "write_synthetic",
    "zero_counts_shares",
]


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


if TYPE_CHECKING:
    from release_store.cluster.backend import (
        GROUP_RECORDS,
        LOOKUP_RECORDS,
        DaskBackend,
        DaskClusterError,
        Placement,
    )
    from release_store.cluster.inputs import (
        CSV_BLOCKSIZE,
        DaskInput,
        column_numbers,
        fingerprint_parts,
        open_input,
        prepare_parts,
        validate_parts,
        whole_table,
        zero_counts_shares,
    )
    from release_store.cluster.session import (
        ADDRESS_ENV,
        CONNECT_TIMEOUT_S,
        ROWS_PER_PARTITION,
        cluster_session,
        connect,
        counting_backend,
        session_backend,
        session_client,
    )
    from release_store.cluster.synthesis import (
        CHUNK_ROWS,
        ROW_GROUP,
        StoredSynthetic,
        chunk_bounds,
        chunks,
        output_columns,
        sample_model_on_cluster,
        synthesize_on_cluster,
        synthesize_reconciled,
        validate_chunks,
        write_synthetic,
    )
