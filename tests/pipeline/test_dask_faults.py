"""A Dask worker killed between a length's map phases (after Δ_k is drawn on the driver): the
lost partitions are recomputed from the Parquet files, the DP percentile is drawn once, and the
aggregates equal the local ones byte for byte."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

distributed = pytest.importorskip("distributed")

from release_store.dask_backend import DaskBackend  # noqa: E402
from sds_core.data.preparation import PrepareParams, prepare  # noqa: E402
from sds_core.dp.randomness import ReleaseRandomness  # noqa: E402
from sds_core.marginals.engine import dp_aggregate  # noqa: E402
from sds_core.marginals.params import DpParams  # noqa: E402
from tests.pipeline.conftest import EXAMPLE  # noqa: E402


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """A LocalCluster of 2 worker processes (with nannies, which restart a killed worker)."""
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


class KillOnce:
    """Delegates to a DaskBackend; after the first Δ_k is chosen, SIGKILLs one worker."""

    def __init__(self, inner: DaskBackend) -> None:
        self.inner = inner
        self.killed = False
        self.choices = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def bounded_counts(self, candidates: Any, *, choose_allowed: Any, record_key: int):  # type: ignore[no-untyped-def]
        """Kill a worker right after the driver's DP choice, before the bounding map."""

        def choose(hist: Any) -> int:
            self.choices += 1
            allowed = int(choose_allowed(hist))
            if not self.killed:
                pids = self.inner.client.run(os.getpid)
                os.kill(sorted(pids.values())[0], signal.SIGKILL)
                self.killed = True
            return allowed

        return self.inner.bounded_counts(candidates, choose_allowed=choose, record_key=record_key)

    def reencoded(self, domain: Any) -> Any:
        """Not used without declared domains."""
        return self.inner.reencoded(domain)


def test_worker_killed_mid_length_gives_identical_aggregates(client: Any, tmp_path: Path) -> None:
    """Kill one of 2 workers between the map phases of length 1: same bytes as local, and
    the percentile is drawn once per length (nothing is drawn or charged twice)."""
    frame = pd.read_csv(EXAMPLE).iloc[:6000]
    folder = tmp_path / "parts"
    folder.mkdir()
    for i, lo in enumerate(range(0, 6000, 1000)):
        pq.write_table(
            pa.Table.from_pandas(frame.iloc[lo : lo + 1000], preserve_index=False),
            folder / f"part-{i}.parquet",
        )
    params = PrepareParams()
    dp = DpParams(reporting_length=3, percentile_percentage=80)
    local = dp_aggregate(prepare(pq.read_table(folder), params), dp, ReleaseRandomness.from_seed(3))
    backend = KillOnce(DaskBackend.from_parquet(client, str(folder), params))
    got = dp_aggregate(backend, dp, ReleaseRandomness.from_seed(3))  # type: ignore[arg-type]
    assert backend.killed and backend.choices == 3
    for k in (1, 2, 3):
        a, b = got.aggregates.counts_of(k), local.aggregates.counts_of(k)
        assert np.array_equal(a.attrs, b.attrs) and np.array_equal(a.counts, b.counts)


def test_worker_killed_with_scattered_partitions_is_a_clear_error(client: Any) -> None:
    """Partitions scattered from memory cannot be recomputed: killing a worker mid-length
    raises DaskClusterError saying what happened and to resume."""
    from release_store.dask_backend import DaskClusterError

    client.wait_for_workers(2)
    frame = pd.read_csv(EXAMPLE).iloc[:3000]
    table = prepare(pa.Table.from_pandas(frame, preserve_index=False), PrepareParams())
    backend = KillOnce(DaskBackend.from_table(client, table, 4))
    dp = DpParams(reporting_length=2, percentile_percentage=80)
    with pytest.raises(DaskClusterError, match="sds resume"):
        dp_aggregate(backend, dp, ReleaseRandomness.from_seed(3))  # type: ignore[arg-type]
