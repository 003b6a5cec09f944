"""A Dask worker killed between a length's map phases (after Δ_k is drawn on the driver): the
lost partitions are recomputed from the Parquet files, the DP percentile is drawn once, and the
aggregates equal the local ones byte for byte. The same through the whole ``sds release`` flow,
whose input is read and prepared by tasks; scattered partitions fail with a clear error."""

from __future__ import annotations

import operator
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

from sds_core.data.params import PrepareParams  # noqa: E402
from sds_core.data.preparation import prepare  # noqa: E402
from sds_core.dp.randomness import ReleaseRandomness  # noqa: E402
from sds_core.marginals.engine import dp_aggregate  # noqa: E402
from sds_core.marginals.params import DpParams  # noqa: E402
from sds_release.store.cluster.backend import DaskBackend  # noqa: E402
from sds_release.store.cluster.inputs import open_input  # noqa: E402
from sds_release.store.cluster.preparation import prepare_parts  # noqa: E402
from sds_release.store.cluster.table import ClusterTable  # noqa: E402
from tests.helpers import EXAMPLE  # noqa: E402


@pytest.fixture(scope="module")
def client(process_client: Any) -> Any:
    """The module's cluster: tests/conftest.py's ``process_client`` (2 worker processes)."""
    return process_client


@pytest.fixture
def three() -> Iterator[Any]:
    """A LocalCluster of 3 worker processes for one flow test: after its two kills one worker
    is left even when no killed worker comes back. A LocalCluster closes a nanny when no worker
    of its name is back ``distributed.deploy.lost-worker-timeout`` (15 s) after the old one
    left, and on a loaded machine a restarted worker takes longer: with 2 workers both kills
    then cost a worker for good and the lost results waited for one forever (now the release
    fails resumably after ``NO_WORKER_TIMEOUT_S``). The timeout is raised here too."""
    import dask

    with (
        dask.config.set({"distributed.deploy.lost-worker-timeout": "600s"}),
        distributed.LocalCluster(
            n_workers=3, threads_per_worker=1, processes=True, dashboard_address=None
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
                pids = self.inner.table.client.run(os.getpid)
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
    data, _ = open_input(client, str(folder), delimiter=",")
    backend = KillOnce(DaskBackend(prepare_parts(data, params)))
    got = dp_aggregate(backend, dp, ReleaseRandomness.from_seed(3))  # type: ignore[arg-type]
    assert backend.killed and backend.choices == 3
    for k in (1, 2, 3):
        a, b = got.aggregates.counts_of(k), local.aggregates.counts_of(k)
        assert np.array_equal(a.attrs, b.attrs) and np.array_equal(a.counts, b.counts)


def test_worker_killed_with_scattered_partitions_is_a_clear_error(client: Any) -> None:
    """Partitions scattered from memory cannot be recomputed: killing a worker mid-length
    raises DaskClusterError saying what happened and to resume."""
    from sds_release.store.cluster.reduction import DaskClusterError

    client.wait_for_workers(2)
    frame = pd.read_csv(EXAMPLE).iloc[:3000]
    table = prepare(pa.Table.from_pandas(frame, preserve_index=False), PrepareParams())
    # one counting group per worker (as at scale): each holds scattered partitions it counts
    backend = KillOnce(DaskBackend(ClusterTable.from_table(client, table, 4), group_records=1))
    dp = DpParams(reporting_length=2, percentile_percentage=80)
    with pytest.raises(DaskClusterError, match="sds resume"):
        dp_aggregate(backend, dp, ReleaseRandomness.from_seed(3))  # type: ignore[arg-type]


class KillDuringMap:
    """Wraps ``reduction.result`` (every reduction's gather): in each target stage (the
    progress text's first word), once its first map's results are on the workers, SIGKILLs the
    worker holding the first result (another one still running), so its results and partitions
    are lost before the reduce gathers them."""

    def __init__(self, targets: tuple[str, ...]) -> None:
        from sds_release.store.cluster import reduction

        self.targets = targets
        self.reduce = reduction.result
        self.stage = ""
        self.killed: list[str] = []

    def on_stage(self, text: str) -> None:
        """Follows the release's progress hook: the stage now running."""
        self.stage = text.split(" ", 1)[0]

    def __call__(self, client: Any, futures: list[Any], combine: Any) -> Any:
        """Kill once per target stage, then reduce as the backend does."""
        if self.stage in self.targets and self.stage not in self.killed:
            with client.as_current():  # distributed.wait uses the current client
                distributed.wait(futures)
            running = client.sync(client.scheduler.ncores_running)
            assert len(running) >= 2, f"a kill would leave no worker: {running}"
            holder = min(client.who_has([futures[0]])[futures[0].key])
            pid = client.run(os.getpid, workers=[holder])[holder]
            os.kill(pid, signal.SIGKILL)
            self.killed.append(self.stage)
        return self.reduce(client, futures, combine)


@pytest.mark.parametrize("kind", ["parquet", "csv"])
def test_release_flow_survives_a_worker_killed_mid_stage(
    kind: str,
    three: Any,
    tmp_path: Path,
    prefect_server: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``sds release --executor dask`` of a 4-part Parquet dataset (or a CSV read in 4 blocks),
    one of 3 workers SIGKILLed in aggregate-2's counting and again in the evaluation's map,
    after their map results were on the workers: the partitions the flow read and prepared with
    tasks are recomputed from the part files (the CSV's byte ranges), the release completes
    with the local executor's bytes, and every stage is charged exactly once."""
    from sds_release.store.cluster import reduction
    from sds_release.store.run import progress
    from sds_release.store.workspace.files import sha256_file
    from tests.helpers import COLUMNS, TINY_CONFIG, charges, run_cli

    frame = pd.read_csv(EXAMPLE, dtype=str, keep_default_na=False)[COLUMNS].iloc[:2000]
    config = tmp_path / "tiny.toml"
    if kind == "parquet":
        data = tmp_path / "parts"
        data.mkdir()
        for i, lo in enumerate(range(0, 2000, 500)):
            table = pa.Table.from_pandas(frame.iloc[lo : lo + 500], preserve_index=False)
            pq.write_table(table, data / f"part-{i}.parquet")
        config.write_text(TINY_CONFIG)
        reader = "_read_part"
    else:
        data = tmp_path / "input.csv"
        frame.to_csv(data, index=False)
        config.write_text("dask_partitions = 4\n" + TINY_CONFIG)
        reader = "_csv_block"
    client = three
    client.wait_for_workers(3, timeout=120)
    monkeypatch.setenv("SDS_DASK_ADDRESS", client.scheduler.address)

    def release(home: Path, *extra: str) -> Path:
        code, out, err = run_cli(
            "release", str(data), "--config", str(config), "--home", str(home),
            "--release-id", "killed", "--seed", "5", "--quiet", *extra,
        )  # fmt: skip
        assert code == 0, err
        return Path(out.strip().splitlines()[-1])

    compared = ("aggregates.parquet", "synthetic.parquet", "evaluation.json")
    local = release(tmp_path / "local")
    kill = KillDuringMap(("aggregate-2", "evaluate"))
    stage = progress.stage
    monkeypatch.setattr(progress, "stage", lambda text: (kill.on_stage(text), stage(text)))
    monkeypatch.setattr(reduction, "result", kill)
    with distributed.get_task_stream(client=client) as tasks:
        dask = release(tmp_path / "dask", "--executor", "dask")
    assert kill.killed == ["aggregate-2", "evaluate"]
    reads = [t for t in tasks.data if str(t["key"]).startswith(reader)]
    assert len(reads) > 4  # lost partitions were read again from their files
    assert {n: sha256_file(dask / n) for n in compared} == {
        n: sha256_file(local / n) for n in compared
    }
    stages = [c.stage for c in charges(tmp_path / "dask")]
    assert stages == [c.stage for c in charges(tmp_path / "local")]
    assert len(stages) == len(set(stages)) and "aggregate-2" in stages


def test_map_reduce_sends_its_kwargs_again_when_their_last_copy_is_lost(
    process_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``map_reduce``'s scattered ``kwargs`` have no lineage, and the scheduler may keep a
    single copy of them (its memory manager drops a broadcast's replicas): the worker holding it
    is killed once the map's results are in, and the exact sum is computed again with the
    ``kwargs`` sent anew instead of failing the stage (CI of af0eb7e, the evaluate stage)."""
    from sds_core.data.domain import Domain
    from sds_core.data.table import PreparedTable
    from sds_release.store.cluster import reduction

    client = process_client
    domain = Domain(("a",), (("x", "y"),))
    sizes = [100, 200, 300, 400]
    first = sorted(client.scheduler_info()["workers"])[0]
    parts = [  # tasks (lambdas travel by value): lost partitions are made again
        client.submit(
            lambda n: PreparedTable(domain, np.zeros((n, 1), dtype=np.int32)),
            n,
            pure=False,
            workers=[first],  # every map task there: no other worker fetches a copy of kwargs
            allow_other_workers=True,
        )
        for n in sizes
    ]
    records = ClusterTable(client, tuple(parts), (0, 100, 300, 600), domain, sum(sizes))
    real_scatter, sent_to = client.scatter, []

    def scatter_to_one(data: Any, **kw: Any) -> Any:  # one copy, as the memory manager leaves
        # first: where the partitions are (the map results it computes are lost with it); then
        # any worker alive
        alive = sorted(client.scheduler_info()["workers"])
        holder = first if not sent_to else alive[0]
        sent_to.append(holder)
        return real_scatter(data, workers=[holder], hash=False)

    real_reduce, killed = reduction.tree_reduce, []

    def kill_holder(client_: Any, futures: list[Any], combine: Any, **kw: Any) -> Any:
        if not killed:
            with client.as_current():
                distributed.wait(futures)
            pid = client.run(os.getpid, workers=[sent_to[-1]])[sent_to[-1]]
            os.kill(pid, signal.SIGKILL)
            killed.append(sent_to[-1])
        return real_reduce(client_, futures, combine, **kw)

    monkeypatch.setattr(client, "scatter", scatter_to_one)
    monkeypatch.setattr(reduction, "tree_reduce", kill_holder)
    total = records.map_reduce(lambda part, scale: part.n_records * scale, operator.add, scale=3)
    assert total == 3 * sum(sizes)
    assert len(sent_to) == 2  # sent again once, after the kill
