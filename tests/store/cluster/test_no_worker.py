"""A reduction never waits forever: with no running worker for NO_WORKER_TIMEOUT_S it fails with
DaskClusterError saying what happened and to resume; a worker that comes back in time is waited
for (sds_release/store/cluster/reduction.py ``result``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

distributed = pytest.importorskip("distributed")

from sds_release.store.cluster import reduction  # noqa: E402
from sds_release.store.cluster.reduction import DaskClusterError  # noqa: E402

CHECK_S = 0.5
"""How often the reduction asks for running workers here (5 s in a release): the bound of 2 s
then ends the wait after ~2.5 s instead of 10 s."""


def _add(a: int, b: int) -> int:
    return a + b


@pytest.fixture
def empty() -> Iterator[tuple[Any, Any]]:
    """An in-process cluster whose only worker has left: the scheduler runs, no worker does."""
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        cluster.scale(0)
        deadline = time.monotonic() + 60
        while client.scheduler_info()["workers"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not client.scheduler_info()["workers"]
        yield cluster, client


def test_no_running_worker_fails_resumably(
    empty: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Results no worker can compute: DaskClusterError after the bound (not a hang), naming the
    cause and `sds resume`."""
    _, client = empty
    monkeypatch.setenv(reduction.NO_WORKER_TIMEOUT_ENV, "2")
    monkeypatch.setattr(reduction, "_CHECK_S", CHECK_S)
    futures = [client.submit(_add, 1, 2, pure=False), client.submit(_add, 3, 4, pure=False)]
    start = time.monotonic()
    with pytest.raises(DaskClusterError, match=r"no running worker for 2 s.*sds resume"):
        reduction.result(client, futures, _add)
    assert time.monotonic() - start < 60


def test_a_worker_back_within_the_bound_is_waited_for(
    empty: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No worker for a while, then one: the reduction waits for it and returns the value."""
    cluster, client = empty
    monkeypatch.setenv(reduction.NO_WORKER_TIMEOUT_ENV, "120")
    monkeypatch.setattr(reduction, "_CHECK_S", CHECK_S)
    futures = [client.submit(_add, 1, 2, pure=False), client.submit(_add, 3, 4, pure=False)]
    # after at least two liveness checks that found no worker
    threading.Timer(3 * CHECK_S, cluster.scale, args=(1,)).start()
    assert reduction.result(client, futures, _add) == 10
