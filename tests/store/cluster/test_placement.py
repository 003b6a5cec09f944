"""Where the workers hold the partitions (release_store/cluster/backend.py ``Placement``): a
cache owned by the release's cluster session (release_store/cluster/session.py), shared by the
backends it serves and asked of the scheduler once per set of partitions; the frozen
``DaskBackend`` holds no cache of its own."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from release_store.cluster import backend as dask_backend  # noqa: E402
from release_store.cluster.backend import DaskBackend, Placement  # noqa: E402
from release_store.cluster.session import (  # noqa: E402
    cluster_session,
    counting_backend,
    session_backend,
)
from sds_core.data.domain import Domain  # noqa: E402
from sds_core.data.table import PreparedTable  # noqa: E402
from sds_core.dp.randomness import ReleaseRandomness  # noqa: E402
from sds_core.marginals.engine import dp_aggregate  # noqa: E402
from sds_core.marginals.params import DpParams  # noqa: E402


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every time the scheduler is asked where partitions are: the number of partitions."""
    calls: list[int] = []
    real = dask_backend._placed_groups

    def spy(client: Any, parts: Any) -> Any:
        calls.append(len(parts))
        return real(client, parts)

    monkeypatch.setattr(dask_backend, "_placed_groups", spy)
    return calls


def _table(n: int = 900) -> PreparedTable:
    rng = np.random.default_rng(3)
    cards = (2, 3, 4, 5)
    codes = np.stack([rng.integers(-1, c, n) for c in cards], axis=1).astype(np.int32)
    dom = Domain(
        tuple(f"C{i}" for i in range(len(cards))),
        tuple(tuple(f"v{j}" for j in range(c)) for c in cards),
    )
    return PreparedTable(dom, codes)


def test_backend_fields_hold_no_mutable_default() -> None:
    """Every DaskBackend field is set at construction (no default factory: nothing mutable
    is created inside the frozen value); the placement defaults to none."""
    fields = dataclasses.fields(DaskBackend)
    assert all(f.default_factory is dataclasses.MISSING for f in fields)
    assert {f.name: f.default for f in fields}["placement"] is None


def test_session_backends_share_one_placement_asked_once(client: Any, asked: list[int]) -> None:
    """Inside the session: the counting backend carries the session's placement, a later
    backend gets the same one, and three lengths ask the scheduler once; outside it a backend
    is left as it is and asks at every call."""
    params = SimpleNamespace(
        executor="dask",
        dask_address=client.scheduler.address,
        dask_partitions=3,
        release_id="placement-test",
    )
    table = _table()
    dp = DpParams(reporting_length=3)
    with cluster_session(params):
        backend = counting_backend(params, table)
        assert isinstance(backend, DaskBackend) and len(backend.parts) == 3
        assert isinstance(backend.placement, Placement)
        assert counting_backend(params, table) is backend  # scattered once per table
        got = dp_aggregate(backend, dp, ReleaseRandomness.from_seed(2))
        assert asked == [3]  # presence and aggregate-1..3: one question
        other = DaskBackend.from_table(backend.client, table, 2)
        assert other.placement is None
        shared = session_backend(params, other)
        assert shared.placement is backend.placement and shared.parts == other.parts
        assert session_backend(params, shared) is shared
        assert counting_backend(params, shared) is shared
    outside = DaskBackend.from_table(client, table, 3)
    assert session_backend(params, outside) is outside  # the session is closed
    again = dp_aggregate(outside, dp, ReleaseRandomness.from_seed(2))
    assert len(asked) > 2  # no cache: asked at every call
    assert np.array_equal(again.aggregates.counts_of(3).counts, got.aggregates.counts_of(3).counts)
