"""The synthetic records' files (sds_release/store/publish/synthetic.py ``write_synthetic``): every
Parquet part and the CSV streamed from the records' chunks into atomic file streams, one chunk
at a time, from the local executor or from the Dask workers, are the bytes of encoding the
whole table at once, whatever the parts, chunks and row groups; a failed write leaves no file
behind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sds_release.store.publish.synthetic as publish_synthetic
import sds_release.store.workspace.encoding as encoding
from sds_core.data.decoding import to_frame
from sds_core.data.params import PrepareParams
from sds_core.data.preparation import prepare
from sds_core.data.table import PreparedTable
from sds_release.store.executor.local import LocalExecutor
from sds_release.store.publish.synthetic import ROW_GROUP, write_synthetic
from sds_release.store.workspace.encoding import (
    SYNTHETIC_PARQUET,
    parquet_bytes,
    part_rows,
    synthetic_csv,
    synthetic_part_name,
)


def _whole_table_files(
    synthetic: PreparedTable, part_records: int | None
) -> tuple[list[bytes], bytes]:
    """The reference: ``synthetic.parquet`` (one or more parts) and ``synthetic.csv`` bytes
    of the whole table encoded at once (one ``write_table`` per part)."""
    frame = to_frame(synthetic, empty_value="", join_multi_value_columns=True)
    parquet, start = [], 0
    for rows in part_rows(len(frame), part_records):
        part = frame if rows == len(frame) else frame.iloc[start : start + rows]
        parquet.append(parquet_bytes(part))
        start += rows
    return parquet, synthetic_csv(synthetic, frame)


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
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    n: int,
    part_records: int | None,
    chunk_rows: int,
    encode_rows: int,
    where: str,
) -> None:
    """write_synthetic of the chunks the Dask executor holds on the workers, or of the local
    executor's table (cut at the same chunk bounds), == the whole table encoded at once, file
    for file (the chunks decoded to text ``encode_rows`` records at a time)."""
    monkeypatch.setattr(encoding, "CHUNK_ROWS", chunk_rows)
    monkeypatch.setattr(publish_synthetic, "ENCODE_ROWS", encode_rows)
    table = _table(n)
    parquet, csv = _whole_table_files(table, part_records)
    out = tmp_path / "release"
    out.mkdir()
    executor: Any = LocalExecutor()
    records: Any = table
    if where == "workers":
        pytest.importorskip("distributed")
        from sds_release.store.cluster.executor import DaskExecutor

        executor = DaskExecutor(request.getfixturevalue("client"))
        records = executor.hold(table, part_records)  # as the synthesize stage leaves them
    chunks = executor.chunks(records, part_records)
    names = write_synthetic(out, records, chunks, part_records)
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
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chunk that cannot be brought here mid-way: the exception reaches the caller, and
    neither the part being written nor synthetic.csv exists (no temporary file either)."""
    monkeypatch.setattr(encoding, "CHUNK_ROWS", 300)
    table = _table(3500)

    def failing() -> Iterator[PreparedTable]:
        for i, chunk in enumerate(LocalExecutor().chunks(table, 1000)):
            if i == 6:  # inside the second part
                raise OSError("disk full")
            yield chunk

    out = tmp_path / "release"
    out.mkdir()
    with pytest.raises(OSError, match="disk full"):
        write_synthetic(out, table, failing(), 1000)
    assert not (out / "synthetic.csv").exists()
    assert not (out / synthetic_part_name(1)).exists()
    assert not list(out.rglob(".*.tmp"))
