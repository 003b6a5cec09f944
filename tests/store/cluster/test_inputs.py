"""Out-of-core input on the Dask executor: a Parquet dataset (directory or glob of part files)
read (``open_input``, the one loader) and prepared (``prepare_parts``) on the workers equals the
local preparation of the whole table, byte for byte, with and without subject-id grouping and
with a record limit; the DP aggregates are then identical too."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

distributed = pytest.importorskip("distributed")

from sds_core.data.params import PrepareParams  # noqa: E402
from sds_core.data.partitions import concatenate  # noqa: E402
from sds_core.data.preparation import prepare  # noqa: E402
from sds_core.data.table import PreparedTable  # noqa: E402
from sds_core.dp.randomness import ReleaseRandomness  # noqa: E402
from sds_core.marginals.engine import dp_aggregate  # noqa: E402
from sds_core.marginals.params import DpParams  # noqa: E402
from sds_release.store.cluster.backend import DaskBackend  # noqa: E402
from sds_release.store.cluster.inputs import open_input  # noqa: E402
from sds_release.store.cluster.preparation import prepare_parts  # noqa: E402
from sds_release.store.cluster.table import ClusterTable  # noqa: E402
from tests.helpers import EXAMPLE  # noqa: E402


def _write_parts(frame: pd.DataFrame, folder: Path, n_files: int) -> Path:
    folder.mkdir()
    bounds = np.linspace(0, len(frame), n_files + 1).astype(int)
    for i, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        pq.write_table(
            pa.Table.from_pandas(frame.iloc[lo:hi], preserve_index=False),
            folder / f"part-{i:03d}.parquet",
        )
    return folder


def _gathered(client: Any, table: ClusterTable) -> PreparedTable:
    return concatenate(client.gather(list(table.parts)))


def _prepared(client: Any, path: str, params: PrepareParams) -> ClusterTable:
    """The dataset read and prepared on the workers, as a Dask release does."""
    data, _ = open_input(client, path, delimiter=",")
    return prepare_parts(data, params)


def _same(a: PreparedTable, b: PreparedTable) -> bool:
    return (
        a.domain == b.domain
        and a.multi_value_columns == b.multi_value_columns
        and np.array_equal(a.codes, b.codes)
    )


def test_parquet_dataset_prepared_on_workers_equals_local(client: Any, tmp_path: Path) -> None:
    """3 or 7 part files (directory and glob), with a multi-value column and a record limit."""
    frame = pd.read_csv(EXAMPLE).iloc[:4000]
    frame["tags"] = np.where(np.arange(4000) % 7 == 0, "a|b", "")
    frame.loc[3000:, "tags"] = np.where(np.arange(3000, 4000) % 5 == 0, "c", "")
    params = PrepareParams(multi_value_columns=(("tags", "|"),), record_limit=3500)
    whole = pq.read_table(_write_parts(frame, tmp_path / "one", 1))
    local = prepare(whole, params)
    rnd = 4
    expected = dp_aggregate(local, DpParams(reporting_length=3), ReleaseRandomness.from_seed(rnd))
    for n_files, spec in ((3, "{}"), (7, "{}/*.parquet")):
        folder = _write_parts(frame, tmp_path / f"p{n_files}", n_files)
        table = _prepared(client, spec.format(folder), params)
        assert len(table.parts) == n_files  # the last part cut at the record limit
        assert _same(_gathered(client, table), local)
        backend = DaskBackend(table)
        got = dp_aggregate(backend, DpParams(reporting_length=3), ReleaseRandomness.from_seed(rnd))
        for k in (1, 2, 3):
            assert np.array_equal(
                got.aggregates.counts_of(k).counts, expected.aggregates.counts_of(k).counts
            )
            assert np.array_equal(
                got.aggregates.counts_of(k).attrs, expected.aggregates.counts_of(k).attrs
            )


def test_subject_rows_meet_in_one_partition(client: Any, tmp_path: Path) -> None:
    """Rows of a subject spread over the part files are joined as locally (ids trimmed and
    case-folded, subjects in id order): identical prepared table at 5 part files."""
    rng = np.random.default_rng(3)
    base = pd.read_csv(EXAMPLE).iloc[:600].reset_index(drop=True)
    base["pid"] = [f"P{i:04d}" for i in range(600)]
    reps = rng.integers(1, 4, 600)
    frame = base.loc[np.repeat(np.arange(600), reps)].reset_index(drop=True)
    frame["tags"] = rng.choice(["x", "y", "x|z", ""], len(frame))
    frame["pid"] = [p.lower() if rng.random() < 0.3 else f" {p}" for p in frame["pid"]]
    frame = frame.iloc[rng.permutation(len(frame))].reset_index(drop=True)
    columns = tuple(c for c in frame.columns if c != "pid")
    params = PrepareParams(
        use_columns=columns, multi_value_columns=(("tags", "|"),), subject_id="PID"
    )
    local = prepare(pq.read_table(_write_parts(frame, tmp_path / "one", 1)), params)
    assert local.n_records == 600
    folder = _write_parts(frame, tmp_path / "five", 5)
    table = _prepared(client, str(folder), params)
    assert table.n_records == 600
    assert _same(_gathered(client, table), local)
