"""An s3:// input on the Dask executor: the driver lists the objects, each worker reads its own
(with its own credentials), and an object that changes after the listing is refused by name."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sds_core.errors import SdsInputError
from sds_release.store.cluster import inputs as cluster_inputs
from sds_release.store.inputs.ingest import read_release_input
from sds_release.store.storage.s3 import filesystem, write_object
from sds_release.store.storage.urls import ObjectUrl


@pytest.fixture(scope="module")
def s3_cluster(s3_server: Any) -> Iterator[Any]:
    """A LocalCluster of 2 worker processes started with the S3 server's AWS_* variables (a
    worker finds its credentials in its own environment)."""
    import os

    distributed = pytest.importorskip("distributed")
    saved = {k: os.environ.get(k) for k in s3_server.storage_options()}
    os.environ.update(s3_server.storage_options())
    try:
        with (
            distributed.LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            yield client
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def dataset(
    s3_cluster: Any, s3_server: Any, tiny_csv: Path, tmp_path: Path, monkeypatch: Any
) -> str:
    """The tiny table as 4 Parquet objects under a fresh prefix; returns the prefix URL."""
    for name, value in s3_server.storage_options().items():
        monkeypatch.setenv(name, value)
    table = read_release_input(tiny_csv, delimiter=",")[0]
    prefix = f"s3://sds-sensitive/{uuid.uuid4().hex[:12]}/"
    for i in range(4):
        path = tmp_path / f"part-{i}.parquet"
        pq.write_table(table.slice(i * 100, 100), path)
        write_object(filesystem(), ObjectUrl.parse(prefix + path.name), path)
    return prefix


def test_workers_read_their_objects(
    s3_cluster: Any, dataset: str, monkeypatch: Any, tmp_path: Path
) -> None:
    """One part per object, read on the workers (the driver reads no object), equal to the
    local read of the same URL, with the same digest; the gate columns only; the object list
    written where asked (the private workspace)."""

    def no_read(*args: Any, **kwargs: Any) -> bytes:
        raise AssertionError("the driver read an object")

    monkeypatch.setattr("sds_release.store.storage.s3.read_object", no_read)
    monkeypatch.setattr(cluster_inputs, "read_object", no_read)  # the workers import their own
    data, digest = cluster_inputs.open_input(
        s3_cluster, dataset, delimiter=",", gate_columns=["sex", "age"], listing=tmp_path / "l.json"
    )
    monkeypatch.undo()
    assert len(data.parts) == 4 and data.rows == (100, 100, 100, 100)
    parts = s3_cluster.gather(list(data.parts))
    local, local_digest = read_release_input(dataset, delimiter=",")
    assert pa.concat_tables(parts).equals(local.select(["sex", "age"]))
    assert digest == local_digest
    import json

    listed = json.loads((tmp_path / "l.json").read_text())["objects"]
    assert [o["url"] for o in listed] == [f"{dataset}part-{i}.parquet" for i in range(4)]
    where = s3_cluster.who_has(list(data.parts))
    assert len({w for ws in where.values() for w in ws}) == 2  # both workers hold parts


def test_object_deleted_after_listing(s3_cluster: Any, dataset: str, monkeypatch: Any) -> None:
    """An object deleted between the driver's listing and a worker's read: the release's
    ingest fails naming it (before anything is charged: ingest precedes every charge)."""
    listed = cluster_inputs.list_input

    def list_then_delete(text: str) -> Any:
        objects = listed(text)
        filesystem().delete_file(objects[2].url.path)
        return objects

    monkeypatch.setattr(cluster_inputs, "list_input", list_then_delete)
    with pytest.raises(SdsInputError, match=r"part-2\.parquet was deleted after the input"):
        cluster_inputs.open_input(s3_cluster, dataset, delimiter=",")


def _fault_injection(name: str) -> tuple[Any, Any]:
    """Two functions to run on a worker (made here, inside a function, so that cloudpickle
    sends them by value: a worker cannot import a test module): the first arms a fault, its
    next read of the object ``name`` fails midway as a dropped connection does (some bytes
    arrive, then the client raises); the second puts the real file system back."""

    def arm() -> str:
        from sds_release.store.storage import s3

        real = getattr(s3, "_before_fault", s3.filesystem)

        class Midway:
            def __init__(self, file: Any) -> None:
                self.file = file

            def __enter__(self) -> Any:
                return self

            def __exit__(self, *exc: Any) -> None:
                self.file.close()

            def metadata(self) -> Any:
                return self.file.metadata()

            def read(self, *args: Any) -> bytes:
                self.file.read(64)
                raise OSError("curlCode: 56, Failure when receiving data from the peer")

        class Faulty:
            def __init__(self, fs: Any) -> None:
                self.fs = fs

            def __getattr__(self, attr: str) -> Any:
                return getattr(self.fs, attr)

            def open_input_file(self, path: str) -> Any:
                file = self.fs.open_input_file(path)
                return Midway(file) if path.endswith(name) else file

        s3._before_fault = real  # type: ignore[attr-defined]
        s3.filesystem = lambda *a, **k: Faulty(real(*a, **k))  # type: ignore[assignment]
        return "armed"

    def disarm() -> str:
        from sds_release.store.storage import s3

        s3.filesystem = s3._before_fault  # type: ignore[attr-defined,assignment]
        return "disarmed"

    return arm, disarm


def test_a_read_failing_midway_on_one_worker_is_refused_before_any_charge(
    s3_cluster: Any, dataset: str, tiny_config: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    """One worker's read of one object fails midway (a dropped connection): the release stops
    in ingest, before its first charge, naming the object, with nothing charged, nothing
    published and the budget whole; once the store answers, a release of the same input (a new
    id: the refused one is closed) completes."""
    from sds_release.store.ledger.book import Ledger
    from tests.helpers import charges, complete_releases, run_cli

    monkeypatch.setenv("SDS_DASK_ADDRESS", s3_cluster.scheduler.address)
    common = ["--config", str(tiny_config), "--executor", "dask", "--seed", "5", "--quiet"]

    def release(home: Path, release_id: str) -> tuple[int, str, str]:
        return run_cli("release", dataset, *common, "--home", str(home), "--release-id", release_id)

    arm, disarm = _fault_injection("part-1.parquet")
    workers = sorted(s3_cluster.scheduler_info()["workers"])
    assert set(s3_cluster.run(arm, workers=workers).values()) == {"armed"}
    home = tmp_path / "faulty"
    try:
        code, _, err = release(home, "s3r-1")
    finally:
        s3_cluster.run(disarm, workers=workers)  # the store answers again
    assert code != 0
    assert "part-1.parquet" in err and "broke during the transfer" in err, err
    assert charges(home) == [] and complete_releases(home) == []
    budget = Ledger.open(home).budget("tiny")
    assert budget is not None and budget.epsilon_spent == 0 and budget.epsilon_reserved == 0

    code, _, err = release(home, "s3r-2")
    assert code == 0, err
    assert len(complete_releases(home)) == 1
