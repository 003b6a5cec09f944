"""The Dask counting backend gives byte-identical DP aggregates to the local one at any
partitioning (sds_release/store/cluster/backend.py over a cluster table's partitions,
sds_core/marginals/backend.py)."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from sds_core.data.domain import Domain  # noqa: E402
from sds_core.data.table import PreparedTable  # noqa: E402
from sds_core.dp.declared import DeclaredDomain  # noqa: E402
from sds_core.dp.randomness import ReleaseRandomness  # noqa: E402
from sds_core.errors import SdsInputError  # noqa: E402
from sds_core.marginals.aggregates import AggregateSet  # noqa: E402
from sds_core.marginals.backend import LocalBackend  # noqa: E402
from sds_core.marginals.engine import dp_aggregate  # noqa: E402
from sds_core.marginals.params import DpParams  # noqa: E402
from sds_release.store.cluster.backend import DaskBackend  # noqa: E402
from sds_release.store.cluster.executor import connect  # noqa: E402
from sds_release.store.cluster.table import ClusterTable  # noqa: E402

CARDS = (2, 3, 5, 8, 4, 6, 3)


def _table(n: int, seed: int) -> PreparedTable:
    """Skewed values, empty cells and a few very full records: bounding always happens."""
    rng = np.random.default_rng(seed)
    codes = np.stack([np.minimum(rng.geometric(0.4, n) - 1, c - 1) for c in CARDS], axis=1)
    codes = codes.astype(np.int32)
    codes[rng.random(codes.shape) < 0.3] = -1
    dom = Domain(
        tuple(f"C{i}" for i in range(len(CARDS))),
        tuple(tuple(f"v{j}" for j in range(c)) for c in CARDS),
    )
    return PreparedTable(dom, codes)


DECLARED = tuple(
    DeclaredDomain(f"C{i}", values=tuple(f"v{j}" for j in range(c)), size=c + 3)
    for i, c in enumerate(CARDS)
)


def _digest(agg: AggregateSet) -> str:
    """sha256 of every length's attrs and counts bytes, the record count and the domain."""
    h = hashlib.sha256(repr((agg.domain, agg.protected_number_of_records)).encode())
    for k in range(1, agg.reporting_length + 1):
        cc = agg.counts_of(k)
        h.update(np.ascontiguousarray(cc.attrs).tobytes())
        h.update(np.ascontiguousarray(cc.counts).tobytes())
    return h.hexdigest()


@pytest.mark.parametrize("declared", [False, True], ids=["raw", "declared"])
def test_local_and_dask_give_identical_aggregates_at_any_partitioning(
    client: Any, declared: bool
) -> None:
    """Local vs Dask at 1, 3 and 7 partitions: the same DP aggregates (bytes) and report."""
    table = _table(4000, 5)
    params = DpParams(
        epsilon=3.0,
        reporting_length=3,
        percentile_percentage=80,  # Δ_k below many records' |W|: contribution bounding runs
        declared_domains=DECLARED if declared else (),
    )
    local = dp_aggregate(LocalBackend(table, 500), params, ReleaseRandomness.from_seed(9))
    assert any(
        a < b for a, b in zip(local.report.allowed_sensitivity_by_len, (7, 21, 35), strict=True)
    )
    for n_parts, group_records in ((1, 1), (3, 1), (7, 1), (7, 10**6)):
        parts = ClusterTable.from_table(client, table, n_parts)
        backend = DaskBackend(
            parts, chunk_records=300, group_records=group_records
        )  # 1: per worker
        got = dp_aggregate(backend, params, ReleaseRandomness.from_seed(9))
        assert _digest(got.aggregates) == _digest(local.aggregates), n_parts
        assert got.report.to_dict() == local.report.to_dict()


def test_dask_exact_aggregates_and_attributes_equal_local(client: Any) -> None:
    """Exact counts (for evaluation) and V_1 summed over 3 partitions equal the local ones."""
    table = _table(1500, 2)
    backend = DaskBackend(ClusterTable.from_table(client, table, 3))
    local = LocalBackend(table)
    assert backend.n_records == 1500
    assert np.array_equal(backend.occurring_attributes(), local.occurring_attributes())
    assert _digest(backend.exact_aggregates(3)) == _digest(local.exact_aggregates(3))


def test_workers_never_import_prefect() -> None:
    """Counting on 2 worker processes (not threads of this interpreter): the workers ran the
    sds_core counting functions, and neither loaded Prefect or Great Expectations."""
    import os
    import sys

    table = _table(2000, 1)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        got = DaskBackend(ClusterTable.from_table(c, table, 4)).occurring_attributes()
        # a lambda travels by value (a module-level function would make the workers import
        # this test module)
        loaded = c.run(lambda: (os.getpid(), sorted(sys.modules)))
    assert np.array_equal(got, LocalBackend(table).occurring_attributes())
    assert len(loaded) == 2
    for pid, modules in loaded.values():
        assert pid != os.getpid()
        assert "sds_core.marginals.backend" in modules  # the worker ran the counting
        heavy = [m for m in modules if m.split(".")[0] in ("prefect", "great_expectations")]
        assert heavy == [], heavy


@pytest.mark.parametrize(
    ("address", "match"),
    [("not an address", "not a scheduler address"), ("tcp://127.0.0.1:9", "no Dask scheduler")],
)
def test_bad_or_unreachable_address_is_a_clear_error(address: str, match: str) -> None:
    """A malformed address or one where nothing listens raises SdsInputError naming the fix."""
    with pytest.raises(SdsInputError, match=match):
        connect(address, timeout=2)
