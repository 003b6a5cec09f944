"""Where the workers hold the partitions (sds_release/store/cluster/table.py ``Placement``): a
cache owned by the release's Dask executor (sds_release/store/cluster/executor.py), shared by every
table it makes and asked of the scheduler once per set of partitions; the frozen
``ClusterTable`` holds no cache of its own."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from sds_core.data.domain import Domain  # noqa: E402
from sds_core.data.table import PreparedTable  # noqa: E402
from sds_core.dp.randomness import ReleaseRandomness  # noqa: E402
from sds_core.marginals.engine import dp_aggregate  # noqa: E402
from sds_core.marginals.params import DpParams  # noqa: E402
from sds_release.store.cluster import table as cluster_table  # noqa: E402
from sds_release.store.cluster.backend import DaskBackend  # noqa: E402
from sds_release.store.cluster.executor import DaskExecutor  # noqa: E402
from sds_release.store.cluster.table import ClusterTable, Placement  # noqa: E402


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every time the scheduler is asked where partitions are: the number of partitions."""
    calls: list[int] = []
    real = cluster_table._placed_groups

    def spy(client: Any, parts: Any) -> Any:
        calls.append(len(parts))
        return real(client, parts)

    monkeypatch.setattr(cluster_table, "_placed_groups", spy)
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


def test_table_fields_hold_no_mutable_default() -> None:
    """Every ClusterTable and DaskBackend field is set at construction (no default factory:
    nothing mutable is created inside the frozen values); the placement defaults to none."""
    for cls in (ClusterTable, DaskBackend):
        assert all(f.default_factory is dataclasses.MISSING for f in dataclasses.fields(cls))
    assert {f.name: f.default for f in dataclasses.fields(ClusterTable)}["placement"] is None


def test_executor_tables_share_one_placement_asked_once(client: Any, asked: list[int]) -> None:
    """The executor's counting backend and its held records carry its placement, and three
    lengths ask the scheduler once; a table of no executor asks at every call."""
    params = SimpleNamespace(dask_address=client.scheduler.address, dask_partitions=None)
    table = _table()
    dp = DpParams(reporting_length=3)
    with DaskExecutor.session(params) as executor:  # type: ignore[arg-type]
        parts = ClusterTable.from_table(executor.client, table, 3)
        assert parts.placement is None
        backend = executor.counting_backend(parts)
        assert isinstance(backend, DaskBackend) and len(backend.table.parts) == 3
        assert backend.table.placement is executor.placement
        assert isinstance(executor.placement, Placement)
        got = dp_aggregate(backend, dp, ReleaseRandomness.from_seed(2))
        assert asked == [3]  # presence and aggregate-1..3: one question
        held = executor.hold(table, 400)  # records sent to the workers: in 3 chunks
        assert held.placement is executor.placement and len(held.parts) == 3
        assert executor.counting_backend(held).table.placement is executor.placement
        outside = DaskBackend(ClusterTable.from_table(executor.client, table, 3))
        again = dp_aggregate(outside, dp, ReleaseRandomness.from_seed(2))
        assert len(asked) > 2  # no placement: asked at every call
    assert np.array_equal(again.aggregates.counts_of(3).counts, got.aggregates.counts_of(3).counts)
