"""A release's cluster session: the ``distributed.Client`` it connects (:func:`connect`) and
what it serves the stages while the release runs.

:func:`cluster_session` opens the session around the flow (``executor = "dask"``: connect
before anything is charged, close at the end); inside it :func:`session_client` gives the
stages the client and :func:`counting_backend` the table's partitions on the workers
(:class:`~release_store.cluster.backend.DaskBackend`, scattered once per table); every backend it
serves shares the session's :class:`~release_store.cluster.backend.Placement` (the mutable
cache of where the workers hold the partitions, kept out of the frozen backends).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from release_store.cluster.backend import DaskBackend, Placement
from sds_core.data.table import PreparedTable
from sds_core.errors import SdsInputError
from sds_core.marginals import backend as core

ADDRESS_ENV = "SDS_DASK_ADDRESS"
CONNECT_TIMEOUT_S = 10.0


def connect(address: str | None, *, timeout: float = CONNECT_TIMEOUT_S) -> Any:
    """A ``distributed.Client``: to the scheduler at ``address`` (else ``$SDS_DASK_ADDRESS``), or
    to an embedded ``LocalCluster`` sized to the machine when neither is set.

    Raises:
        SdsInputError: the address is malformed or no scheduler answers there within
            ``timeout`` seconds (raised before the release reads or charges anything).
    """
    from distributed import Client, LocalCluster

    address = address or os.environ.get(ADDRESS_ENV) or None
    if address is None:
        cluster = LocalCluster(  # type: ignore[no-untyped-call]
            processes=True, threads_per_worker=1, dashboard_address=None
        )
        return Client(cluster)  # type: ignore[no-untyped-call]
    if "://" not in address and ":" not in address:
        raise SdsInputError(
            f"dask_address {address!r} is not a scheduler address; give it as tcp://host:8786 "
            f"(--dask-address or ${ADDRESS_ENV})"
        )
    try:
        return Client(address, timeout=timeout)  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError, ValueError) as e:
        raise SdsInputError(
            f"no Dask scheduler answers at dask_address {address!r} ({type(e).__name__}: {e}); "
            "start one (`dask scheduler` and `dask worker <address>`), fix --dask-address / "
            f"${ADDRESS_ENV}, or drop it for an embedded LocalCluster"
        ) from e


@dataclass
class _Session:
    """One release's cluster: its client, the partition count asked for, the backends of its
    in-memory tables (by table) and where the workers hold the partitions (``placement``)."""

    client: Any
    partitions: int | None
    backends: dict[int, tuple[PreparedTable, DaskBackend]] = field(default_factory=dict)
    placement: Placement = field(default_factory=Placement)


_SESSIONS: dict[str, _Session] = {}
ROWS_PER_PARTITION = 1_000_000


@contextmanager
def cluster_session(params: Any) -> Iterator[None]:
    """With ``params.executor == "dask"``: connect (a bad address raises here, before the
    release charges anything) and serve :func:`counting_backend` for ``params.release_id``
    until the block ends; then close the client (and an embedded cluster). Else nothing."""
    if getattr(params, "executor", "local") != "dask":
        yield
        return
    client = connect(params.dask_address)
    key = str(params.release_id)
    _SESSIONS[key] = _Session(client, params.dask_partitions)
    try:
        yield
    finally:
        _SESSIONS.pop(key, None)
        embedded = getattr(client, "cluster", None)
        client.close()
        if embedded is not None:
            embedded.close()


def session_client(params: Any) -> Any:
    """The ``distributed.Client`` of this release's cluster session, or None (executor local,
    or outside :func:`cluster_session`)."""
    session = _SESSIONS.get(str(getattr(params, "release_id", "")))
    if getattr(params, "executor", "local") != "dask" or session is None:
        return None
    return session.client


def session_backend(params: Any, backend: DaskBackend) -> DaskBackend:
    """``backend`` with this release's :class:`~release_store.cluster.backend.Placement`
    (where the workers hold its partitions, asked once for the whole release); unchanged
    outside :func:`cluster_session`."""
    session = _SESSIONS.get(str(getattr(params, "release_id", "")))
    if session is None or backend.placement is session.placement:
        return backend
    return dataclasses.replace(backend, placement=session.placement)


def counting_backend(params: Any, table: PreparedTable | DaskBackend) -> core.CountingBackend:
    """The counting backend of this release: local, the table read and prepared on the
    cluster (a :class:`DaskBackend` already), or the table's partitions on the session's
    cluster (scattered once per table, reused by every stage); a :class:`DaskBackend` with
    the session's placement."""
    if isinstance(table, DaskBackend):
        return session_backend(params, table)
    session = _SESSIONS.get(str(params.release_id))
    if getattr(params, "executor", "local") != "dask" or session is None:
        return core.LocalBackend(table)
    cached = session.backends.get(id(table))
    if cached is not None and cached[0] is table:
        return cached[1]
    workers = max(1, len(session.client.scheduler_info().get("workers", {})))
    n_parts = session.partitions or max(2 * workers, -(-table.n_records // ROWS_PER_PARTITION))
    backend = DaskBackend.from_table(session.client, table, min(n_parts, max(1, table.n_records)))
    backend = dataclasses.replace(backend, placement=session.placement)
    session.backends[id(table)] = (table, backend)
    return backend
