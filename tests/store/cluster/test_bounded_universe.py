"""The Dask backend's length-1 universe is the bounded one, as the local backend's (issue #27
point 4): values dropped by contribution bounding are no candidates on either backend, and the
two give byte-identical aggregates."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from sds_core.data.domain import Domain  # noqa: E402
from sds_core.data.table import PreparedTable  # noqa: E402
from sds_core.dp.randomness import ReleaseRandomness  # noqa: E402
from sds_core.marginals.backend import LocalBackend  # noqa: E402
from sds_core.marginals.engine import aggregate_length, dp_aggregate, plan_release  # noqa: E402
from sds_core.marginals.params import DpParams  # noqa: E402
from sds_release.store.cluster.backend import DaskBackend  # noqa: E402
from sds_release.store.cluster.table import ClusterTable  # noqa: E402

N_COLS = 12


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """An in-process Dask cluster of 2 single-thread workers."""
    with distributed.Client(
        processes=False, n_workers=2, threads_per_worker=1, dashboard_address=None
    ) as c:
        yield c


def _table() -> PreparedTable:
    """2000 records with 3 common values each, and 20 records spread over the table whose 12
    values are their own: bounding to Δ_1 = 3 drops 9 of each outlier's values."""
    rng = np.random.default_rng(11)
    codes = np.full((2000, N_COLS), -1, dtype=np.int32)
    for row in codes:
        row[rng.choice(N_COLS, 3, replace=False)] = rng.integers(0, 2, 3)
    outliers = rng.choice(2000, 20, replace=False)
    codes[outliers] = 2 + np.arange(20, dtype=np.int32)[:, None]
    dom = Domain(
        tuple(f"C{i}" for i in range(N_COLS)),
        tuple(("a", "b", *(f"u{j:02d}" for j in range(20))) for _ in range(N_COLS)),
    )
    return PreparedTable(dom, codes)


def test_dask_and_local_share_the_bounded_length_one_universe(client: Any) -> None:
    """|V_1| = 24 common values + 20·Δ_1 outlier values on both backends; identical releases."""
    table = _table()
    params = DpParams(epsilon=2.0, delta=1e-6, reporting_length=2, sensitivity_cap=3)
    plan = plan_release(params, 2000)
    local = LocalBackend(table, 300)
    dask = DaskBackend(ClusterTable.from_table(client, table, 5), chunk_records=300)
    steps = [
        aggregate_length(b, 1, {}, plan, params, ReleaseRandomness.from_seed(4), release_label="r")
        for b in (local, dask)
    ]
    assert steps[0].allowed_sensitivity == steps[1].allowed_sensitivity == 3
    assert steps[0].n_candidates == steps[1].n_candidates == 2 * N_COLS + 20 * 3
    a = dp_aggregate(local, params, ReleaseRandomness.from_seed(4))
    b = dp_aggregate(dask, params, ReleaseRandomness.from_seed(4))
    for k in (1, 2):
        assert np.array_equal(a.aggregates.counts_of(k).attrs, b.aggregates.counts_of(k).attrs)
        assert np.array_equal(a.aggregates.counts_of(k).counts, b.aggregates.counts_of(k).counts)
    assert a.report.to_dict() == b.report.to_dict()
