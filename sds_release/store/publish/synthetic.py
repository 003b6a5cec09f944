"""The synthetic records' published files, written from the records' chunks: one writer for
records anywhere (``publish`` calls it in its second thread).

``synthetic.parquet`` (one file, or a directory of parts) and ``synthetic.csv`` are streamed a
chunk at a time (:func:`write_synthetic`), each chunk decoded to text :data:`ENCODE_ROWS`
records at a time, so this process never holds the records' whole text; the bytes are those of
encoding the whole table at once (``tests/store/publish/test_synthetic_stream.py``).
"""

from __future__ import annotations

import functools
import itertools
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from sds_core.data.decoding import to_frame
from sds_core.data.table import PreparedTable
from sds_core.errors import SdsInternalError
from sds_release.store.workspace.encoding import (
    SYNTHETIC_PARQUET,
    no_records,
    part_rows,
    synthetic_csv,
    synthetic_part_name,
)
from sds_release.store.workspace.files import atomic_write_stream

ENCODE_ROWS = 1 << 16
"""Records publish decodes to text at a time: their frame of strings (one Python object per
cell, ~50 bytes each), CSV rows and Arrow table, many times the size of their codes, are what
the driver holds beside the row group's tables. 2^18 held ~80 MiB more at binned 10M
(``bench/bench_publish_memory.py``: +465 -> +385 MiB, raw 2M +415 -> +336; the same bytes;
``write_synthetic`` alone at raw 2M 2.0-2.1 s either way)."""


def slices(tables: Iterator[PreparedTable], rows: int | None = None) -> Iterator[PreparedTable]:
    """Each table cut into consecutive tables of at most ``rows`` (default ENCODE_ROWS)
    records (a table of no records stays one)."""
    rows = rows or ENCODE_ROWS
    for table in tables:
        n = table.n_records
        for lo in range(0, max(n, 1), rows):
            yield PreparedTable(
                table.domain, table.codes[lo : lo + rows], table.multi_value_columns
            )


ROW_GROUP = 1 << 20
"""pyarrow's default Parquet row group (``write_table``): the streamed parts use the same."""


def write_synthetic(
    out: Path, synthetic: Any, chunks: Iterator[PreparedTable], part_records: int | None
) -> list[str]:
    """``synthetic.parquet`` (one file, or a directory of parts of ``part_records``) and
    ``synthetic.csv`` of the records, streamed from ``chunks`` (the records in row order, cut at
    :func:`~sds_release.store.workspace.encoding.chunk_bounds`, brought here one at a time by the
    executor that holds them) into atomic file streams: this process holds a chunk and at most
    one row group of text, and the files have the bytes of the whole table's encoders
    (``to_frame`` of all records: one ``write_table`` per part, ``synthetic_csv``).
    ``synthetic``: the records (their domain, multi-value columns and count). Returns the part
    names (none: one file)."""
    rows = part_rows(synthetic.n_records, part_records)
    target = out / SYNTHETIC_PARQUET
    if target.is_dir():
        shutil.rmtree(target)
    names = [] if len(rows) == 1 else [synthetic_part_name(i) for i in range(len(rows))]
    if names:
        target.unlink(missing_ok=True)
        target.mkdir()
    paths = [target] if not names else [out / n for n in names]
    empty = no_records(synthetic)
    empty_frame = to_frame(empty, empty_value="", join_multi_value_columns=True)
    header = synthetic_csv(empty, empty_frame)
    pieces = slices(chunks)

    def write_all(csv: Any) -> None:
        csv.write(header)
        done = 0
        for path, end in zip(paths, itertools.accumulate(rows), strict=True):
            atomic_write_stream(
                path, functools.partial(write_part, csv=csv, pieces=pieces, done=done, end=end)
            )
            done = end
        if next(pieces, None) is not None:
            raise SdsInternalError("synthetic chunks beyond the last parquet part (bug)")

    def write_part(
        parquet: Any, *, csv: Any, pieces: Iterator[PreparedTable], done: int, end: int
    ) -> None:
        """One part's chunks (global rows ``done..end-1``), decoded ENCODE_ROWS records at a
        time: their CSV rows after the header, their Parquet row groups of ROW_GROUP records
        from the part's first row, as ``write_table`` of the whole part (a chunk never
        straddles two parts: chunk_bounds)."""
        import pyarrow.parquet as pq  # loaded when the first part is written, not on import

        pending: list[pa.Table] = []
        held = 0
        writer: Any = None

        def flush(rows_out: int) -> None:
            """A row group of the first ``rows_out`` records held, written from the held
            tables as one chunked table (no contiguous copy: ``write_table`` encodes a
            column's chunks one after the other, the bytes of the combined table); the
            rest's chunks stay held, the written ones are released."""
            nonlocal pending, held, writer
            whole = pa.concat_tables(pending)
            group, rest = whole.slice(0, rows_out), whole.slice(rows_out)
            del whole
            if writer is None:
                writer = pq.ParquetWriter(parquet, group.schema)
            writer.write_table(group, row_group_size=ROW_GROUP)
            pending = [rest] if rest.num_rows else []
            held -= rows_out

        while True:  # at least one chunk a part (a table of no records: one empty chunk)
            table = next(pieces, None)
            if table is None:
                raise SdsInternalError("synthetic chunks end before the last parquet part (bug)")
            frame = to_frame(table, empty_value="", join_multi_value_columns=True)
            body = synthetic_csv(table, frame)
            if not body.startswith(header):
                raise SdsInternalError("synthetic.csv chunk without the table's header (bug)")
            csv.write(body[len(header) :])
            pending.append(pa.Table.from_pandas(frame, preserve_index=False))
            held += table.n_records
            done += table.n_records
            del frame, body, table
            while held >= ROW_GROUP:  # row groups from the part's first row, as write_table
                flush(ROW_GROUP)
            if done == end:
                break
            if done > end:
                raise SdsInternalError("a synthetic chunk straddles two parquet parts (bug)")
        if held or writer is None:
            if not pending:
                pending.append(pa.Table.from_pandas(empty_frame, preserve_index=False))
            flush(held)
        writer.close()

    atomic_write_stream(out / "synthetic.csv", write_all)
    return names
