"""Publishing the synthetic chunks on the workers (release_store/cluster/synthesis.py
``write_synthetic``): every Parquet part and the CSV streamed into atomic file streams, one chunk
at a time, are the bytes ``synthetic_files`` writes for the whole table, whatever the parts,
chunks and row groups; a failed write leaves no file behind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

distributed = pytest.importorskip("distributed")

import release_store.cluster.synthesis as dask_synthesis  # noqa: E402
from release_store.cluster.backend import DaskBackend  # noqa: E402
from release_store.cluster.synthesis import ROW_GROUP, chunk_bounds, write_synthetic  # noqa: E402
from release_store.workspace.encoding import (  # noqa: E402
    SYNTHETIC_PARQUET,
    synthetic_files,
    synthetic_part_name,
)
from sds_core.data.params import PrepareParams  # noqa: E402
from sds_core.data.preparation import prepare  # noqa: E402
from sds_core.data.table import PreparedTable  # noqa: E402


def _table(n: int) -> PreparedTable:
    """``n`` records: text and numeric-looking values, empty cells and a multi-value column
    (re-joined on output), 3,000 distinct prepared rows repeated."""
    rng = np.random.default_rng(6)
    base = pd.DataFrame(
        {
            "sex": rng.choice(["1", "2"], 3000),
            "age": rng.choice(["18", "40", "77", ""], 3000),
            "city": rng.choice(["Oslo", "Bergen", "Tromsø", ""], 3000),
            "tags": rng.choice(["a|b", "c", "", "b"], 3000),
        }
    )
    small = prepare(
        pa.Table.from_pandas(base, preserve_index=False),
        PrepareParams(multi_value_columns=(("tags", "|"),)),
    )
    codes = np.resize(small.codes, (n, small.domain.n_columns))
    return PreparedTable(small.domain, codes, small.multi_value_columns)


def _chunked(client: Any, table: PreparedTable, part_records: int | None) -> DaskBackend:
    """The table as the synthesize stage leaves it: chunks on the workers, in row order."""
    bounds = chunk_bounds(table.n_records, part_records)
    pieces = [
        PreparedTable(table.domain, table.codes[lo:hi], table.multi_value_columns)
        for lo, hi in bounds
    ]
    parts = client.scatter(pieces, hash=False)
    return DaskBackend(
        client,
        tuple(parts),
        tuple(lo for lo, _ in bounds),
        table.domain,
        table.n_records,
        multi_value_columns=table.multi_value_columns,
    )


def _written(out: Path, names: list[str]) -> list[bytes]:
    if not names:
        return [(out / SYNTHETIC_PARQUET).read_bytes()]
    return [(out / name).read_bytes() for name in names]


@pytest.mark.parametrize(
    ("n", "part_records", "chunk_rows", "encode_rows"),
    [
        (0, None, 300, 1 << 18),  # no records: one empty file
        (3500, None, 300, 1 << 18),  # one file, 12 chunks
        (3500, 1000, 300, 1 << 18),  # 4 parts of 4, 4, 4 and 2 chunks
        (3500, 1000, 300, 128),  # each chunk decoded in 3 slices (128, 128, 44 records)
        (3500, None, 1000, 333),  # slices not aligned with the chunks
        # 2 parts; the first has 2 row groups, the second starting inside a chunk
        pytest.param(
            ROW_GROUP + 101_424, ROW_GROUP + 51_424, 300_000, 1 << 18, marks=pytest.mark.slow
        ),
    ],
)
@pytest.mark.parametrize("where", ["workers", "here"])
def test_streamed_parts_and_csv_are_the_whole_table_bytes(
    client: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    n: int,
    part_records: int | None,
    chunk_rows: int,
    encode_rows: int,
    where: str,
) -> None:
    """write_synthetic of the chunks on the workers, or of the table in this process (cut at
    the same chunk bounds), == synthetic_files of the whole table, file for file (the chunks
    decoded to text ``encode_rows`` records at a time)."""
    monkeypatch.setattr(dask_synthesis, "CHUNK_ROWS", chunk_rows)
    monkeypatch.setattr(dask_synthesis, "ENCODE_ROWS", encode_rows)
    table = _table(n)
    parquet, csv = synthetic_files(table, part_records=part_records)
    out = tmp_path / "release"
    out.mkdir()
    records = _chunked(client, table, part_records) if where == "workers" else table
    names = write_synthetic(out, records, part_records)
    want_names = [synthetic_part_name(i) for i in range(len(parquet))]
    assert names == ([] if len(parquet) == 1 else want_names)
    assert len(_written(out, names)) == len(parquet)
    for got, want in zip(_written(out, names), parquet, strict=True):
        assert got == want
    assert (out / "synthetic.csv").read_bytes() == csv
    groups = [pq.ParquetFile(out / name).metadata.num_row_groups for name in names] or [
        pq.ParquetFile(out / SYNTHETIC_PARQUET).metadata.num_row_groups
    ]
    if n > ROW_GROUP:
        assert groups[0] == 2  # the streamed row-group boundary is exercised
    assert not list(out.rglob(".*.tmp"))  # no temporary file left


def test_a_failed_stream_leaves_no_part_and_no_csv(
    client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chunk that cannot be decoded mid-way: the exception reaches the caller, and neither
    the part being written nor synthetic.csv exists (no temporary file either)."""
    monkeypatch.setattr(dask_synthesis, "CHUNK_ROWS", 300)
    table = _table(3500)
    chunked = _chunked(client, table, 1000)
    real = dask_synthesis.chunks

    def failing(synthetic: DaskBackend) -> Iterator[PreparedTable]:
        for i, chunk in enumerate(real(synthetic)):
            if i == 6:  # inside the second part
                raise OSError("disk full")
            yield chunk

    monkeypatch.setattr(dask_synthesis, "chunks", failing)
    out = tmp_path / "release"
    out.mkdir()
    with pytest.raises(OSError, match="disk full"):
        write_synthetic(out, chunked, 1000)
    assert not (out / "synthetic.csv").exists()
    assert not (out / synthetic_part_name(1)).exists()
    assert not list(out.rglob(".*.tmp"))
